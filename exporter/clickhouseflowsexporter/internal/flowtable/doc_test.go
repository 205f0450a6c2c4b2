package flowtable

import (
	"testing"

	"github.com/flowtel/flowtel/internal/flowrecord/gencheck"
)

// TestDocIsCurrent keeps docs/clickhouse.md's column tables equal to the
// columns the exporter writes. Run with FLOWTEL_UPDATE_DOCS=1 to rewrite them.
func TestDocIsCurrent(t *testing.T) {
	gencheck.Section(t, "../../../../docs/clickhouse.md",
		"<!-- BEGIN GENERATED COLUMNS (exporter/clickhouseflowsexporter/internal/flowtable: FLOWTEL_UPDATE_DOCS=1 go test) -->\n",
		"<!-- END GENERATED COLUMNS -->\n", Markdown(),
		"run FLOWTEL_UPDATE_DOCS=1 go test ./exporter/clickhouseflowsexporter/internal/flowtable")
}
