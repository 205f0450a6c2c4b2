package catalogue

import (
	"fmt"
	"strings"
)

// SchemaMarkdown renders the field table of docs/flow-schema.md from the
// catalogue, so the document cannot drift from the codec and the wires (a
// test compares them).
func SchemaMarkdown() string {
	var b strings.Builder
	b.WriteString("| Attribute | Type | Meaning | Antrea IPFIX IE (name (id, enterprise)) | ClickHouse column |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, f := range catalogue {
		doc := f.Doc
		if f.Aggregation {
			doc = "*(aggregate mode)* " + doc
		}
		if f.Derived {
			doc = "*(derived)* " + doc
		}
		name, typ := "–", "–"
		if f.Attribute != "" {
			name, typ = "`"+f.Attribute+"`", f.AttrType
		}
		ies := make([]string, len(f.IPFIX))
		for i, ie := range f.IPFIX {
			ies[i] = fmt.Sprintf("%s (%d, %d)", ie.Name, ie.ID, ie.Enterprise)
			if ie.Inbound {
				ies[i] += " read only"
			}
		}
		cols := make([]string, len(f.ClickHouse))
		for i, c := range f.ClickHouse {
			cols[i] = c.Name
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, typ, doc, orDash(strings.Join(ies, " / ")), orDash(strings.Join(cols, ", ")))
	}
	return b.String()
}

// AttributeNames lists every attribute name of the schema, in encoding order.
func AttributeNames() []string {
	var names []string
	for _, f := range catalogue {
		if f.Attribute != "" {
			names = append(names, f.Attribute)
		}
	}
	return names
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
