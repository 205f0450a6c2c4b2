//go:build integration

package dashboards_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/flowtel/flowtel/deploy/dashboards/demodata"
	"github.com/flowtel/flowtel/distributions"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/testbed/chserver"
	"github.com/flowtel/flowtel/testbed/collector"
)

// scrapeGateway runs the built gateway distribution on its shipped
// configuration (plaintext OTLP on loopback, no Kubernetes index, ClickHouse
// as the sink, as the testbed runs it), sends it demodata's records as both
// Nodes' halves, and returns the metrics of its telemetry endpoint with their
// label names, and that endpoint's host:port. A second exporter to a closed
// port, without retries or queue, fails every send, so the failure counters
// exist too.
func scrapeGateway(t *testing.T) (exposed, string) {
	t.Helper()
	bin, err := collector.Binary("../..", "flowtel-gateway")
	require.NoError(t, err)
	srv := chserver.Start(t, chserver.Options{})
	port := func() int {
		p, err := collector.FreePort()
		require.NoError(t, err)
		return p
	}
	health, metricsPort, otlpPort := port(), port(), port()
	p, err := collector.Start(context.Background(), collector.Options{
		Name: "gateway", Binary: bin, Dir: t.TempDir(), HealthPort: health, MetricsPort: metricsPort,
		Configs: []string{distributions.Config(distributions.Gateway)},
		Config: fmt.Sprintf(`
extensions:
  health_check: {endpoint: "127.0.0.1:%d"}
receivers:
  otlp: {protocols: {grpc: {endpoint: "127.0.0.1:%d", tls: {enabled: false}, middlewares: []}}}
processors:
  flow_correlation: {pairing_timeout: 1s, kubernetes: {enabled: false}}
exporters:
  clickhouse_flows: {endpoint: %s, database: scrape}
  otlp/closed: {endpoint: "127.0.0.1:%d", tls: {insecure: true}, timeout: 1s, retry_on_failure: {enabled: false}, sending_queue: {enabled: false}}
service:
  telemetry:
    metrics:
      readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]
  pipelines:
    logs: {processors: [memory_limiter, flow_correlation], exporters: [clickhouse_flows, otlp/closed, signal_to_metrics]}
`, health, otlpPort, srv.Endpoint(), port(), metricsPort),
		// node_identity (not in the pipeline: this test sends no token) reads it.
		Env: []string{"POD_NAMESPACE=flowtel"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })

	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for _, r := range demodata.Records(time.Now()) {
		r.Aggregation, r.Correlation = nil, 0
		r.Reporter = flowrecord.Reporter{NodeName: r.Source.NodeName, Side: flowrecord.SideSource}
		r.Key = r.CorrelationKey()
		attrcodec.Encode(r, lrs.AppendEmpty())
	}
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", otlpPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	// The closed exporter fails the export; the records still reach the others.
	_, _ = plogotlp.NewGRPCClient(conn).Export(context.Background(), plogotlp.NewExportRequestFromLogs(ld))

	labelRe := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	out := exposed{}
	require.Eventually(t, func() bool {
		m, err := p.Metrics("otelcol_")
		if err != nil {
			return false
		}
		for k := range m {
			name, labels, _ := strings.Cut(k, "{")
			out.add(name)
			for _, l := range labelRe.FindAllStringSubmatch(labels, -1) {
				out.add(name, l[1])
			}
		}
		return out["otelcol_exporter_clickhouse_flows_rows_written"] != nil && out["otelcol_exporter_send_failed_log_records"] != nil
	}, 30*time.Second, 200*time.Millisecond, "the gateway's telemetry never showed rows written and a failed send")
	return out, fmt.Sprintf("127.0.0.1:%d", metricsPort)
}

// TestPipelineNamesAreScraped: the stock collector metrics of the Prometheus
// dashboard, and the labels it groups them by, are what a running gateway
// exposes; and flowtel's metrics the gateway exposes are named as their
// documentation.md says (the rule documentedMetrics applies to the node
// collectors' metrics too).
func TestPipelineNamesAreScraped(t *testing.T) {
	scraped, target := scrapeGateway(t)
	documented := documentedMetrics(t)
	var checked int
	for name := range scraped {
		for _, p := range []string{"otelcol_processor_flow_correlation_", "otelcol_exporter_clickhouse_flows_"} {
			if strings.HasPrefix(name, p) {
				assert.Contains(t, documented, name, "the gateway exposes %s, which no documentation.md names", name)
				checked++
			}
		}
	}
	assert.Positive(t, checked)
	for id, expr := range promTargets(t) {
		metrics, by := promSelectors(t, expr)
		for _, m := range metrics {
			if !isStock(m) {
				continue
			}
			labels, ok := scraped[m]
			if !assert.True(t, ok, "%s: the gateway does not expose %s", id, m) {
				continue
			}
			for _, l := range by {
				if l != "instance" && l != "job" {
					assert.True(t, labels[l], "%s: %s has no label %q (has %v)", id, m, l, labels)
				}
			}
		}
	}
	t.Run("on Prometheus", func(t *testing.T) { evaluateOnPrometheus(t, target, scraped) })
}

// evaluateOnPrometheus runs a real Prometheus scraping the gateway at target
// and evaluates every expression of the Prometheus dashboard, with Grafana's
// $job (All) and $__rate_interval filled in: each must parse and evaluate, and
// one whose metrics the gateway exposes must return series.
func evaluateOnPrometheus(t *testing.T, target string, scraped exposed) {
	bin, err := exec.LookPath("prometheus")
	require.NoError(t, err, "prometheus is not installed (scripts/deps.sh installs the Debian package)")
	port, err := collector.FreePort()
	require.NoError(t, err)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: flowtel-gateway
    static_configs: [{targets: ["%s"]}]
`, target)), 0o644))
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	require.NoError(t, err)
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	api := fmt.Sprintf("http://127.0.0.1:%d/api/v1/query", port)
	query := func(expr string) (int, error) {
		resp, err := http.PostForm(api, url.Values{"query": {expr}})
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var r struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return 0, err
		}
		if r.Status != "success" {
			return 0, fmt.Errorf("%s", r.Error)
		}
		return len(r.Data.Result), nil
	}
	// Enough scrapes for a rate over the 1m window.
	require.Eventually(t, func() bool {
		n, err := query(`count_over_time(otelcol_process_uptime[1m]) >= 3`)
		return err == nil && n > 0
	}, 60*time.Second, 250*time.Millisecond, "Prometheus did not scrape the gateway")
	grafana := strings.NewReplacer(`"$job"`, `".*"`, "$__rate_interval", "1m")
	var evaluated, withSeries int
	defer func() {
		t.Logf("%d expressions evaluated, %d of them on the gateway's metrics with series", evaluated, withSeries)
	}()
	for id, expr := range promTargets(t) {
		evaluated++
		n, err := query(grafana.Replace(expr))
		if !assert.NoError(t, err, "%s: %s", id, expr) {
			continue
		}
		metrics, _ := promSelectors(t, expr)
		all := true
		for _, m := range metrics {
			all = all && scraped[m] != nil
		}
		if all {
			withSeries++
			assert.Positive(t, n, "%s: %s returns no series although the gateway exposes its metrics", id, expr)
		}
	}
}
