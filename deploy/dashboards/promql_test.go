package dashboards_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/flowtel/flowtel/deploy/dashboards"
	"github.com/flowtel/flowtel/distributions"
)

// exposed is a metric name as Prometheus shows it, and its label names.
type exposed map[string]map[string]bool

func (e exposed) add(name string, labels ...string) {
	if e[name] == nil {
		e[name] = map[string]bool{}
	}
	for _, l := range labels {
		e[name][l] = true
	}
}

// documentedMetrics reads flowtel's components' documentation.md (mdatagen's
// output from metadata.yaml): each internal metric as the collector's
// Prometheus endpoint shows it (the name as documented, no type or unit
// suffix, as the gateway's scrape in TestPipelineNamesAreScraped confirms; a
// histogram as _bucket, _sum, _count) with its attributes.
func documentedMetrics(t *testing.T) exposed {
	t.Helper()
	files, err := filepath.Glob("../../*/*/documentation.md")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := exposed{}
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		var names []string
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := sc.Text()
			if name, ok := strings.CutPrefix(line, "### "); ok {
				names = []string{name}
				out.add(name)
				continue
			}
			cells := strings.Split(line, "|")
			if len(names) == 0 || len(cells) < 4 {
				continue
			}
			switch kind := strings.TrimSpace(cells[2]); {
			case kind == "Histogram":
				base := names[0]
				delete(out, base)
				names = []string{base + "_bucket", base + "_sum", base + "_count"}
				for _, n := range names {
					out.add(n, "le")
				}
			case regexp.MustCompile(`^[a-z_]+$`).MatchString(strings.TrimSpace(cells[1])) && strings.Contains(line, "Str:"):
				for _, n := range names {
					out.add(n, strings.TrimSpace(cells[1]))
				}
			}
		}
		require.NoError(t, sc.Err())
		fh.Close()
	}
	return out
}

// flowMetrics are the gateway's signal_to_metrics metrics as Prometheus names
// them (OTLP ingestion or a prometheus exporter): dots to underscores, a
// monotonic sum with _total; attribute keys likewise.
func flowMetrics(t *testing.T) exposed {
	t.Helper()
	b, err := os.ReadFile(distributions.Config(distributions.Gateway))
	require.NoError(t, err)
	var cfg struct {
		Connectors map[string]struct {
			Logs []struct {
				Name       string `yaml:"name"`
				Attributes []struct {
					Key string `yaml:"key"`
				} `yaml:"attributes"`
				Sum *struct {
					Monotonic bool `yaml:"monotonic"`
				} `yaml:"sum"`
			} `yaml:"logs"`
		} `yaml:"connectors"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	out := exposed{}
	us := strings.NewReplacer(".", "_")
	for _, m := range cfg.Connectors["signal_to_metrics"].Logs {
		name := us.Replace(m.Name)
		if m.Sum != nil && m.Sum.Monotonic {
			name += "_total"
		}
		out.add(name)
		for _, a := range m.Attributes {
			out.add(name, us.Replace(a.Key))
		}
	}
	require.NotEmpty(t, out, "the gateway's config.yaml has no signal_to_metrics logs metrics")
	return out
}

var (
	selectorRe = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)
	bareRe     = regexp.MustCompile(`\b(?:otelcol|flowtel)_[a-zA-Z0-9_]*\b`)
	byRe       = regexp.MustCompile(`\bby \(([^)]*)\)`)
)

// promSelectors lists the metric names an expression selects (every metric in
// the dashboards is written with a {job=~"$job"} selector) and the labels it
// groups by.
func promSelectors(t *testing.T, expr string) (metrics, by []string) {
	t.Helper()
	for _, m := range selectorRe.FindAllStringSubmatch(expr, -1) {
		metrics = append(metrics, m[1])
	}
	bare := bareRe.FindAllString(selectorRe.ReplaceAllString(expr, "{"), -1)
	assert.Empty(t, bare, "%s: metrics without a {job=~\"$job\"} selector", expr)
	for _, m := range byRe.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			by = append(by, strings.TrimSpace(l))
		}
	}
	return metrics, by
}

// promTargets returns every Prometheus query of the dashboards.
func promTargets(t *testing.T) map[string]string {
	t.Helper()
	boards, err := dashboards.Load()
	require.NoError(t, err)
	out := map[string]string{}
	for _, d := range boards {
		for _, p := range d.Panels {
			if p.Datasource.Type != dashboards.Prometheus {
				continue
			}
			require.NotEmpty(t, p.Targets, "%s/%s", d.UID, p.Title)
			for _, tg := range p.Targets {
				require.NotEmpty(t, tg.Expr, "%s/%s %s", d.UID, p.Title, tg.RefID)
				out[d.UID+"/"+p.Title+"/"+tg.RefID] = tg.Expr
			}
		}
	}
	require.NotEmpty(t, out, "no Prometheus dashboard")
	return out
}

// stockPrefixes are the collector core's own metrics (receiver, exporter,
// process telemetry); TestPipelineNamesAreScraped checks them against a running
// gateway.
var stockPrefixes = []string{"otelcol_receiver_accepted_", "otelcol_receiver_refused_", "otelcol_exporter_sent_",
	"otelcol_exporter_send_failed_", "otelcol_exporter_queue_", "otelcol_process_"}

func isStock(name string) bool {
	for _, p := range stockPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// TestPromQLNames: every metric of the Prometheus dashboard is one flowtel's
// components document or the gateway's signal_to_metrics connector produces
// (with the labels it groups by), or a stock collector metric.
func TestPromQLNames(t *testing.T) {
	known := documentedMetrics(t)
	for n, ls := range flowMetrics(t) {
		known[n] = ls
	}
	for id, expr := range promTargets(t) {
		metrics, by := promSelectors(t, expr)
		assert.NotEmpty(t, metrics, "%s: %s selects no metric", id, expr)
		for _, m := range metrics {
			if isStock(m) {
				continue
			}
			labels, ok := known[m]
			if !assert.True(t, ok, "%s: %s is neither documented by a component nor produced by signal_to_metrics", id, m) {
				continue
			}
			for _, l := range by {
				if l != "instance" && l != "job" {
					assert.True(t, labels[l], "%s: %s has no label %q (has %v)", id, m, l, labels)
				}
			}
		}
	}
}
