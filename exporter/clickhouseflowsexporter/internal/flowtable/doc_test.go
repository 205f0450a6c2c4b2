package flowtable

import (
	"os"
	"strings"
	"testing"
)

const (
	docPath  = "../../../../docs/clickhouse.md"
	docBegin = "<!-- BEGIN GENERATED COLUMNS (exporter/clickhouseflowsexporter/internal/flowtable: FLOWTEL_UPDATE_DOCS=1 go test) -->\n"
	docEnd   = "<!-- END GENERATED COLUMNS -->\n"
)

// TestDocIsCurrent keeps docs/clickhouse.md's column tables equal to the
// columns the exporter writes. Run with FLOWTEL_UPDATE_DOCS=1 to rewrite them.
func TestDocIsCurrent(t *testing.T) {
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatal("docs/clickhouse.md lacks the generated-table markers")
	}
	want := doc[:i+len(docBegin)] + Markdown() + doc[j:]
	if os.Getenv("FLOWTEL_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Errorf("docs/clickhouse.md is stale: run FLOWTEL_UPDATE_DOCS=1 go test ./exporter/clickhouseflowsexporter/internal/flowtable")
	}
}
