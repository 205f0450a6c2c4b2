package catalogue

import (
	"testing"

	"github.com/flowtel/flowtel/internal/flowrecord/gencheck"
)

const (
	schemaDocPath  = "../../../docs/flow-schema.md"
	schemaDocBegin = "<!-- BEGIN GENERATED ATTRIBUTES (internal/flowrecord/catalogue: FLOWTEL_UPDATE_DOCS=1 go test) -->\n"
	schemaDocEnd   = "<!-- END GENERATED ATTRIBUTES -->\n"
)

// TestSchemaDocIsCurrent keeps docs/flow-schema.md's attribute table equal to the
// schema. Run with FLOWTEL_UPDATE_DOCS=1 to rewrite it.
func TestSchemaDocIsCurrent(t *testing.T) {
	gencheck.Section(t, schemaDocPath, schemaDocBegin, schemaDocEnd, SchemaMarkdown(), "run FLOWTEL_UPDATE_DOCS=1 go test ./internal/flowrecord/catalogue")
}
