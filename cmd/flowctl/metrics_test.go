//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/testbed/collector"
)

// flowctl metrics against the built gateway distribution: records sent to
// it over OTLP show up as received and pending correlation.
func TestMetricsFromTheGateway(t *testing.T) {
	bin, err := collector.Binary(filepath.Join("..", ".."), "flowtel-gateway")
	require.NoError(t, err)
	health, metricsPort, otlpPort := freePort(t), freePort(t), freePort(t)
	p, err := collector.Start(context.Background(), collector.Options{
		Name: "gateway", Binary: bin, Dir: t.TempDir(), HealthPort: health, MetricsPort: metricsPort,
		Config: fmt.Sprintf(`
extensions:
  health_check: {endpoint: 127.0.0.1:%d}
receivers:
  otlp: {protocols: {grpc: {endpoint: 127.0.0.1:%d}}}
processors:
  flow_correlation: {mode: aggregate, active_timeout: 60s, inactive_timeout: 90s}
exporters:
  debug: {verbosity: basic}
service:
  telemetry:
    metrics:
      readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]
  extensions: [health_check]
  pipelines:
    logs: {receivers: [otlp], processors: [flow_correlation], exporters: [debug]}
`, health, otlpPort, metricsPort),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })

	// Three source halves waiting for their peers.
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := range 3 {
		now := time.Now()
		r := &flowrecord.Record{Start: now.Add(-time.Second), End: now, Observed: now, Protocol: 6,
			Source:      flowrecord.Endpoint{Address: netip.MustParseAddr("10.10.0.5"), Port: uint16(40000 + i), Kind: flowrecord.EndpointPod, Namespace: "ns-a", PodName: "web", NodeName: "node-a"},
			Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("10.10.1.7"), Port: 8080, Kind: flowrecord.EndpointPod},
			FlowType:    flowrecord.FlowTypeInterNode, Reporter: flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideSource},
			Stats: flowrecord.Counters{PacketTotal: 1, OctetTotal: 60, PacketDelta: 1, OctetDelta: 60}}
		r.Key = r.CorrelationKey()
		attrcodec.Encode(r, lrs.AppendEmpty())
	}
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", otlpPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	_, err = plogotlp.NewGRPCClient(conn).Export(context.Background(), plogotlp.NewExportRequestFromLogs(ld))
	require.NoError(t, err)

	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	var out string
	require.Eventually(t, func() bool {
		var code int
		out, _, code = flowctl(context.Background(), "metrics", "--url", url)
		return code == 0 && strings.Contains(out, "records received") && strings.Contains(out, "records pending correlation")
	}, 20*time.Second, 200*time.Millisecond, "%s", out)
	assert.Regexp(t, `records received\s+3\n`, out)
	assert.Regexp(t, `records pending correlation\s+3\n`, out)

	js, _, code := flowctl(context.Background(), "metrics", "--url", url, "-o", "json")
	require.Zero(t, code)
	var parsed struct {
		Summary map[string]float64 `json:"summary"`
	}
	require.NoError(t, json.Unmarshal([]byte(js), &parsed))
	assert.Equal(t, 3.0, parsed.Summary["records received"])

	_, errOut, code := flowctl(context.Background(), "metrics", "--url", fmt.Sprintf("http://127.0.0.1:%d/metrics", freePort(t)))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is the collector's telemetry reachable?")
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := collector.FreePort()
	require.NoError(t, err)
	return p
}
