package flowtable

import (
	"strings"
	"testing"
)

// The clustered statements name the cluster, replicate per shard under a
// path of their own, and keep the one-server table's columns.
func TestClusterStatements(t *testing.T) {
	c := Cluster{Name: "flows-cluster", Database: "db"}
	local := c.CreateLocalTable("flows", 0)
	for _, want := range []string{
		"CREATE TABLE IF NOT EXISTS `db`.`flows_local` ON CLUSTER `flows-cluster` (",
		"ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/db/flows_local', '{replica}')",
	} {
		if !strings.Contains(local, want) {
			t.Errorf("local table DDL lacks %q:\n%s", want, local)
		}
	}
	_, oneServer, _ := strings.Cut(CreateTable("db", "flows", 0), "(")
	oneServer, _, _ = strings.Cut(oneServer, ") ENGINE")
	if !strings.Contains(local, oneServer) {
		t.Error("the local table's columns are not the one-server table's")
	}
	dist := c.CreateDistributed("flows", ShardingKey)
	if want := "ENGINE = Distributed('flows-cluster', 'db', 'flows_local', " + ShardingKey + ")"; !strings.Contains(dist, want) {
		t.Errorf("Distributed DDL lacks %q:\n%s", want, dist)
	}
	if got := c.AddColumns("flows_local", Columns[:2]); got != "ALTER TABLE `db`.`flows_local` ON CLUSTER `flows-cluster` ADD COLUMN "+
		Columns[0].Name+" "+Columns[0].Type+", ADD COLUMN "+Columns[1].Name+" "+Columns[1].Type {
		t.Errorf("AddColumns: %s", got)
	}
	stmts := c.ViewStatements("flows", 0)
	if len(stmts) != 3*len(Views) {
		t.Fatalf("%d view statements, want 3 per view", len(stmts))
	}
	for i, v := range Views {
		table, view, dist := stmts[3*i], stmts[3*i+1], stmts[3*i+2]
		if !strings.Contains(table, "`db`.`"+v.Table+"` ON CLUSTER") || !strings.Contains(table, "ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/db/"+v.Table+"'") {
			t.Errorf("%s table:\n%s", v.Name, table)
		}
		if !strings.Contains(view, "`db`.`"+v.Name+"_local` ON CLUSTER") || !strings.Contains(view, "TO `db`.`"+v.Table+"`") || !strings.Contains(view, "FROM `db`.`flows_local`") {
			t.Errorf("%s view:\n%s", v.Name, view)
		}
		if !strings.Contains(dist, "`db`.`"+v.Name+"` ON CLUSTER") || !strings.Contains(dist, "Distributed('flows-cluster', 'db', '"+v.Table+"', rand())") {
			t.Errorf("%s Distributed:\n%s", v.Name, dist)
		}
	}
	if got := InsertTimeStatement("db", "flows"); !strings.HasSuffix(got, ", "+Columns[len(Columns)-1].Name+", timeInserted)") {
		t.Errorf("InsertTimeStatement: %s", got)
	}
}
