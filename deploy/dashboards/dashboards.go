// Package dashboards holds flowtel's Grafana dashboards (the *.json files of
// this directory, the one source) and a reader of their panels and queries for
// the tests. The Helm chart and the kustomize component ship copies that
// TestCopies keeps identical.
package dashboards

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
)

//go:embed *.json
var files embed.FS

// Datasource plugin types the dashboards query.
const (
	ClickHouse = "grafana-clickhouse-datasource"
	Prometheus = "prometheus"
)

// Dashboard is the part of a dashboard's JSON model the tests read.
type Dashboard struct {
	File       string     `json:"-"`
	UID        string     `json:"uid"`
	Title      string     `json:"title"`
	Panels     []Panel    `json:"panels"`
	Templating Templating `json:"templating"`
}

// Templating holds the dashboard's variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a dashboard variable.
type Variable struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Query is a string, or an object for a query variable.
	Query json.RawMessage `json:"query"`
}

// Panel is one panel (or row) and its queries.
type Panel struct {
	ID         int        `json:"id"`
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource Datasource `json:"datasource"`
	Targets    []Target   `json:"targets"`
}

// Datasource names a datasource by plugin type and uid (a variable here).
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Target is one query of a panel: RawSQL for the ClickHouse plugin (its
// query model: editorType sql, queryType table or timeSeries, format 1 or 0),
// Expr for Prometheus.
type Target struct {
	RefID      string     `json:"refId"`
	Datasource Datasource `json:"datasource"`
	EditorType string     `json:"editorType"`
	QueryType  string     `json:"queryType"`
	Format     *int       `json:"format"`
	RawSQL     string     `json:"rawSql"`
	Expr       string     `json:"expr"`
}

// Names returns the file names of the dashboards, sorted.
func Names() []string {
	names, _ := fs.Glob(files, "*.json")
	sort.Strings(names)
	return names
}

// Raw returns a dashboard file's bytes.
func Raw(name string) ([]byte, error) { return files.ReadFile(name) }

// Load parses every dashboard.
func Load() ([]Dashboard, error) {
	var out []Dashboard
	for _, name := range Names() {
		b, err := Raw(name)
		if err != nil {
			return nil, err
		}
		var d Dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		d.File = name
		out = append(out, d)
	}
	return out, nil
}

// Query is one ClickHouse panel's SQL, as the dashboard holds it.
type Query struct {
	Dashboard, Panel, PanelType, SQL string
}

// ClickHouseQueries returns the SQL of every ClickHouse panel of every
// dashboard, in file and panel order.
func ClickHouseQueries() ([]Query, error) {
	boards, err := Load()
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, d := range boards {
		for _, p := range d.Panels {
			if p.Datasource.Type != ClickHouse {
				continue
			}
			for _, t := range p.Targets {
				out = append(out, Query{Dashboard: d.UID, Panel: p.Title, PanelType: p.Type, SQL: t.RawSQL})
			}
		}
	}
	return out, nil
}
