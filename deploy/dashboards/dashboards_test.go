package dashboards_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/deploy/dashboards"
)

// copyDirs hold generated copies of the dashboards: Helm and kustomize read
// only files below their own directory.
var copyDirs = []string{"../helm/flowtel/dashboards", "../kubernetes/components/grafana-dashboards"}

// TestCopies: the chart's and the kustomize component's dashboards are the
// files of this directory, byte for byte, and nothing else.
// FLOWTEL_UPDATE_GENERATED=1 rewrites them.
func TestCopies(t *testing.T) {
	update := os.Getenv("FLOWTEL_UPDATE_GENERATED") == "1"
	names := dashboards.Names()
	require.NotEmpty(t, names)
	for _, dir := range copyDirs {
		if update {
			old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
			for _, f := range old {
				require.NoError(t, os.Remove(f))
			}
		}
		for _, name := range names {
			src, err := dashboards.Raw(name)
			require.NoError(t, err)
			dst := filepath.Join(dir, name)
			if update {
				require.NoError(t, os.WriteFile(dst, src, 0o644))
			}
			got, err := os.ReadFile(dst)
			if assert.NoError(t, err, "run FLOWTEL_UPDATE_GENERATED=1 go test -run TestCopies ./deploy/dashboards") {
				assert.Equal(t, string(src), string(got), "%s differs from deploy/dashboards/%s: run FLOWTEL_UPDATE_GENERATED=1 go test -run TestCopies ./deploy/dashboards", dst, name)
			}
		}
		copies, err := filepath.Glob(filepath.Join(dir, "*.json"))
		require.NoError(t, err)
		assert.Len(t, copies, len(names), "%s holds a dashboard deploy/dashboards does not", dir)
	}
	kz, err := os.ReadFile("../kubernetes/components/grafana-dashboards/kustomization.yaml")
	require.NoError(t, err)
	for _, name := range names {
		assert.Contains(t, string(kz), "- "+name+"\n", "the kustomize component does not generate a ConfigMap for %s", name)
	}
}

var timeFirst = regexp.MustCompile(`(?s)^SELECT\s+toDateTime\(intDiv\(toUInt32\((\w+)\), \$__interval_s\) \* \$__interval_s\) AS time,`)

// TestModel checks what Grafana and the plugins need of each dashboard: a
// unique uid named after the file, unique panel ids, every panel on the
// dashboard's datasource variable, the ClickHouse plugin's query model
// (editorType sql; queryType table with format 1, or timeSeries with format 0
// and a DateTime column "time" first), and the $__timeFilter macro on every
// ClickHouse query.
func TestModel(t *testing.T) {
	boards, err := dashboards.Load()
	require.NoError(t, err)
	uids := map[string]bool{}
	for _, d := range boards {
		t.Run(d.File, func(t *testing.T) {
			raw, err := dashboards.Raw(d.File)
			require.NoError(t, err)
			require.True(t, json.Valid(raw))
			assert.Equal(t, strings.TrimSuffix(d.File, ".json"), d.UID)
			assert.False(t, uids[d.UID], "uid %s twice", d.UID)
			uids[d.UID] = true
			vars := map[string]string{}
			for _, v := range d.Templating.List {
				vars[v.Name] = v.Type
			}
			require.Equal(t, "datasource", vars["datasource"], "no datasource variable")
			ids := map[int]bool{}
			var plugin string
			for _, p := range d.Panels {
				assert.False(t, ids[p.ID], "panel id %d twice", p.ID)
				ids[p.ID] = true
				if p.Type == "row" {
					continue
				}
				if plugin == "" {
					plugin = p.Datasource.Type
				}
				assert.Equal(t, plugin, p.Datasource.Type, "%s: one datasource type per dashboard", p.Title)
				assert.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
				require.NotEmpty(t, p.Targets, p.Title)
				for _, tg := range p.Targets {
					assert.Equal(t, p.Datasource, tg.Datasource, p.Title)
					if plugin != dashboards.ClickHouse {
						continue
					}
					assert.Equal(t, "sql", tg.EditorType, p.Title)
					require.NotNil(t, tg.Format, p.Title)
					assert.Contains(t, tg.RawSQL, "FROM ${table}\nWHERE $__timeFilter(flowEndSeconds)", p.Title)
					if p.Type == "timeseries" {
						assert.Equal(t, "timeSeries", tg.QueryType, p.Title)
						assert.Equal(t, 0, *tg.Format, p.Title)
						assert.Regexp(t, timeFirst, tg.RawSQL, p.Title)
					} else {
						assert.Equal(t, "table", tg.QueryType, p.Title)
						assert.Equal(t, 1, *tg.Format, p.Title)
					}
				}
			}
			assert.Contains(t, []string{dashboards.ClickHouse, dashboards.Prometheus}, plugin)
			if plugin == dashboards.ClickHouse {
				assert.Equal(t, "textbox", vars["table"], "a ClickHouse dashboard has the table variable")
			}
		})
	}
	assert.Len(t, boards, 3)
}

// TestExpander: the expansions of the plugin's macros (pkg/macros of
// grafana-clickhouse-datasource) and Grafana's variables, and what is refused.
func TestExpander(t *testing.T) {
	from := time.Unix(1_700_000_000, 0).UTC()
	g := dashboards.Expander{From: from, To: from.Add(time.Hour), Interval: 90 * time.Second, Vars: map[string]string{"table": "db.flows"}}
	for in, want := range map[string]string{
		"SELECT 1 FROM ${table} WHERE $__timeFilter(flowEndSeconds)": "SELECT 1 FROM db.flows WHERE flowEndSeconds >= toDateTime(1700000000) AND flowEndSeconds <= toDateTime(1700003600)",
		"$table":                       "db.flows",
		"$__interval_s":                "90",
		"$__timeInterval(t)":           "toStartOfInterval(toDateTime(t), INTERVAL 90 second)",
		"$__fromTime, $__toTime":       "toDateTime(1700000000), toDateTime(1700003600)",
		"$__fromTime_ms":               "fromUnixTimestamp64Milli(1700000000000)",
		"$__timeFilter_ms(t)":          "t >= fromUnixTimestamp64Milli(1700000000000) AND t <= fromUnixTimestamp64Milli(1700003600000)",
		"$__dateFilter(d)":             "d >= toDate('2023-11-14') AND d <= toDate('2023-11-14')",
		"intDiv(x, $__interval_s) * 2": "intDiv(x, 90) * 2",
	} {
		got, err := g.Expand(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for in, want := range map[string]string{
		"FROM ${database}.flows":  "undefined dashboard variable ${database}",
		"$__conditionalAll(a, b)": "not a macro",
		"$__timeFilter(a, b)":     "2 arguments, want 1",
	} {
		_, err := g.Expand(in)
		assert.ErrorContains(t, err, want, in)
	}
}
