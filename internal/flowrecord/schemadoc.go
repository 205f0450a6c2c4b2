package flowrecord

import (
	"fmt"
	"strings"
)

// SchemaMarkdown renders the attribute table of docs/flow-schema.md from the
// schema, so the document cannot drift from the codec (a test compares them).
func SchemaMarkdown() string {
	var b strings.Builder
	b.WriteString("| Attribute | Type | Meaning | Antrea IPFIX IE (name (id, enterprise)) | ClickHouse column |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, a := range attributes {
		doc := a.Doc
		if a.aggregation {
			doc = "*(aggregate mode)* " + doc
		}
		if a.Derived {
			doc = "*(derived)* " + doc
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", a.Name, a.Type, doc, orDash(a.IPFIX), orDash(a.Column))
	}
	return b.String()
}

// AttributeNames lists every attribute name of the schema, in encoding order.
func AttributeNames() []string {
	names := make([]string, len(attributes))
	for i, a := range attributes {
		names[i] = a.Name
	}
	return names
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
