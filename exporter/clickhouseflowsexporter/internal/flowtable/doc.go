package flowtable

import (
	"fmt"
	"strings"
)

// Markdown renders the column tables of docs/clickhouse.md from the columns
// (and so from the field catalogue), so the document cannot drift from what
// the exporter writes (a test compares them).
func Markdown() string {
	var b strings.Builder
	header := "| Column | Type | Field | Value |\n|---|---|---|---|\n"
	b.WriteString("### Antrea's columns\n\n" + header)
	b.WriteString("| timeInserted | DateTime DEFAULT now() | – | set by the server |\n")
	flowtel := false
	for _, c := range Columns {
		if c.Flowtel && !flowtel {
			flowtel = true
			b.WriteString("\n### flowtel's columns\n\nTheir fields are in `docs/flow-schema.md`.\n\n" + header)
		}
		field := "–" // a field without an attribute: its doc says where it is
		if c.attr != "" {
			field = "`" + c.attr + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.Name, c.Type, field, strings.TrimSpace(c.doc+" "+c.kind.note(c)))
		if c.Name == TrustedAfter {
			b.WriteString("| trusted | UInt8 DEFAULT 0 | – | never written |\n")
		}
	}
	return b.String()
}

// note says how a value of the kind is written.
func (k kind) note(c Column) string {
	switch k {
	case kindTime:
		return "In the column: Unix seconds, 0 (1970-01-01) when unknown."
	case kindUInt8:
		if names := c.value.Names; names != nil {
			vals := make([]string, 0, len(names))
			for i, n := range names[1:] {
				vals = append(vals, fmt.Sprintf("%d `%s`", i+1, n))
			}
			return "Values: " + strings.Join(vals, ", ") + ", 0 unset."
		}
	case kindName:
		return "`\"\"` when unset."
	case kindAddr:
		return "Textual address, `\"\"` when unset."
	}
	return ""
}
