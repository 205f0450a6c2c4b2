package flowrecord

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
)

const (
	schemaDocPath  = "../../docs/flow-schema.md"
	schemaDocBegin = "<!-- BEGIN GENERATED ATTRIBUTES (internal/flowrecord: FLOWTEL_UPDATE_DOCS=1 go test) -->\n"
	schemaDocEnd   = "<!-- END GENERATED ATTRIBUTES -->\n"
)

// TestSchemaDocIsCurrent keeps docs/flow-schema.md's attribute table equal to the
// schema. Run with FLOWTEL_UPDATE_DOCS=1 to rewrite it.
func TestSchemaDocIsCurrent(t *testing.T) {
	raw, err := os.ReadFile(schemaDocPath)
	require.NoError(t, err)
	doc := string(raw)
	i, j := strings.Index(doc, schemaDocBegin), strings.Index(doc, schemaDocEnd)
	require.True(t, i >= 0 && j > i, "docs/flow-schema.md lacks the generated-table markers")
	want := doc[:i+len(schemaDocBegin)] + SchemaMarkdown() + doc[j:]
	if os.Getenv("FLOWTEL_UPDATE_DOCS") == "1" {
		require.NoError(t, os.WriteFile(schemaDocPath, []byte(want), 0o644))
		return
	}
	assert.Equal(t, want, doc, "docs/flow-schema.md is stale: run FLOWTEL_UPDATE_DOCS=1 go test ./internal/flowrecord")
}

// Every attribute the codec writes is documented.
func TestEveryWrittenAttributeIsDocumented(t *testing.T) {
	raw, err := os.ReadFile(schemaDocPath)
	require.NoError(t, err)
	lr := plog.NewLogRecord()
	Encode(fullRecord(), lr)
	require.Equal(t, len(attributes), lr.Attributes().Len(), "a full record writes every schema attribute")
	for name := range lr.Attributes().All() {
		assert.Contains(t, string(raw), "| `"+name+"` |", "attribute %s is not in docs/flow-schema.md", name)
	}
}
