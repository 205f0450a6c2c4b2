package flowrecord

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord/gencheck"
)

const (
	schemaDocPath  = "../../docs/flow-schema.md"
	schemaDocBegin = "<!-- BEGIN GENERATED ATTRIBUTES (internal/flowrecord: FLOWTEL_UPDATE_DOCS=1 go test) -->\n"
	schemaDocEnd   = "<!-- END GENERATED ATTRIBUTES -->\n"
)

// TestSchemaDocIsCurrent keeps docs/flow-schema.md's attribute table equal to the
// schema. Run with FLOWTEL_UPDATE_DOCS=1 to rewrite it.
func TestSchemaDocIsCurrent(t *testing.T) {
	gencheck.Section(t, schemaDocPath, schemaDocBegin, schemaDocEnd, SchemaMarkdown(), "run FLOWTEL_UPDATE_DOCS=1 go test ./internal/flowrecord")
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
