package flowtable

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

const goldenPath = "testdata/table.golden"

// TestTableGolden pins the table the exporter creates and writes: the DDL,
// the INSERT's column list, and every column's value for the test records.
// Existing tables (Antrea's, Theia's) depend on the column names, types and
// order, so a change here must be intended: run with FLOWTEL_UPDATE_GOLDEN=1
// to rewrite testdata/table.golden.
func TestTableGolden(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n%s\n\n%s\n\n", CreateTable("db", "flows", 0), CreateTable("db", "flows", time.Hour), InsertStatement("db", "flows"))
	recs := flowrecordtest.Records()
	block := NewBlock(len(recs))
	for i, r := range recs {
		block.Add(&Row{Record: r, ClusterUUID: fmt.Sprint("cluster-", i)})
	}
	for i, c := range Columns {
		buf := &block.cols[i]
		fmt.Fprintf(&b, "%s %s flowtel=%t:", c.Name, c.Type, c.Flowtel)
		for row := range block.Len() {
			switch {
			case buf.i64 != nil:
				fmt.Fprintf(&b, " %d", buf.i64[row])
			case buf.u8 != nil:
				fmt.Fprintf(&b, " %d", buf.u8[row])
			case buf.u16 != nil:
				fmt.Fprintf(&b, " %d", buf.u16[row])
			case buf.u64 != nil:
				fmt.Fprintf(&b, " %d", buf.u64[row])
			default:
				fmt.Fprintf(&b, " %q", buf.str[row])
			}
		}
		b.WriteString("\n")
	}
	got := b.String()
	if os.Getenv("FLOWTEL_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the table differs from %s:\n%s", goldenPath, got)
	}
}
