package flowtable

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
	"github.com/flowtel/flowtel/internal/flowrecord/gencheck"
)

// TestTableGolden pins the table the exporter creates and writes: the DDL,
// the INSERT's column list, Theia's views, the ALTERs of a clustered
// schema, and every column's value for the test records.
// Existing tables (Antrea's, Theia's) depend on the column names, types and
// order, so a change here must be intended: run with FLOWTEL_UPDATE_GOLDEN=1
// to rewrite testdata/table.golden.
func TestTableGolden(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n%s\n\n%s\n\n", CreateTable("db", "flows", 0), CreateTable("db", "flows", time.Hour), InsertStatement("db", "flows"))
	for _, stmt := range ViewStatements("db", "flows", time.Hour) {
		fmt.Fprintf(&b, "%s\n\n", stmt)
	}
	theia := Distributed{Cluster: "c1", Database: "db", Table: "flows_local"}
	for _, stmt := range ClusterAlters("db", "flows", theia, Columns[50:52], Columns[51:52]) {
		fmt.Fprintf(&b, "%s\n\n", stmt)
	}
	recs := flowrecordtest.Records()
	block := NewBlock(len(recs))
	for i, r := range recs {
		block.Add(&Row{Record: r, ClusterUUID: fmt.Sprint("cluster-", i)})
	}
	values := block.Slices()
	for i, c := range Columns {
		fmt.Fprintf(&b, "%s %s flowtel=%t:", c.Name, c.Type, c.Flowtel)
		switch v := values[i].(type) {
		case []string:
			for _, s := range v {
				fmt.Fprintf(&b, " %q", s)
			}
		default:
			rv := reflect.ValueOf(v)
			for row := range rv.Len() {
				fmt.Fprintf(&b, " %d", rv.Index(row).Interface())
			}
		}
		b.WriteString("\n")
	}
	gencheck.File(t, "testdata/table.golden", b.String(), "run FLOWTEL_UPDATE_GOLDEN=1 go test after an intended change of the table")
}
