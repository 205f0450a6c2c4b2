package flowtable

import (
	"strings"
	"testing"
	"time"
)

func TestVersionSupportsTTL(t *testing.T) {
	for _, c := range []struct {
		v    Version
		want bool
	}{
		{Version{18, 16, 1}, false}, {Version{19, 5, 9}, false}, {Version{19, 6, 0}, true},
		{Version{20, 1, 0}, true}, {Version{26, 7, 2}, true},
	} {
		if got := c.v.SupportsTTL(); got != c.want {
			t.Errorf("%s.SupportsTTL() = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestCreateTable(t *testing.T) {
	ddl := CreateTable("db", "flows", 0)
	if strings.Contains(ddl, "TTL") {
		t.Errorf("no ttl, but DDL has a TTL:\n%s", ddl)
	}
	for _, banned := range []string{"DateTime64", "IPv4", "IPv6", "Map(", "LowCardinality", "CODEC", "Bool"} {
		if strings.Contains(ddl, banned) {
			t.Errorf("DDL uses %s, which ClickHouse 18.16 rejects", banned)
		}
	}
	if !strings.HasPrefix(ddl, "CREATE TABLE IF NOT EXISTS `db`.`flows` (\n    timeInserted DateTime DEFAULT now(),\n    flowStartSeconds DateTime,") {
		t.Errorf("DDL does not start with Antrea's first columns:\n%s", ddl)
	}
	if !strings.Contains(ddl, "clusterUUID String,\n    egressName String,\n    egressIP String,\n    trusted UInt8 DEFAULT 0,\n    egressNodeName String,") {
		t.Error("trusted is not after egressIP, as in a table Theia creates, with egressNodeName after it")
	}
	if ddl := CreateTable("db", "flows", 36*time.Hour); !strings.Contains(ddl, "\nTTL timeInserted + INTERVAL 129600 SECOND\n") {
		t.Errorf("ttl 36h not in DDL:\n%s", ddl)
	}
}

func TestColumns(t *testing.T) {
	seen := map[string]bool{}
	antrea, flowtel := 0, 0
	for i, c := range Columns {
		if seen[c.Name] {
			t.Errorf("duplicate column %s", c.Name)
		}
		seen[c.Name] = true
		if c.Flowtel {
			flowtel++
		} else {
			antrea++
			if flowtel > 0 {
				t.Errorf("Antrea column %s (#%d) after flowtel's columns", c.Name, i)
			}
		}
	}
	if antrea != 51 {
		t.Errorf("%d Antrea columns, want 51", antrea)
	}
	if flowtel != 17 {
		t.Errorf("%d flowtel columns, want 17", flowtel)
	}
	ins := InsertStatement("db", "t")
	if !strings.HasPrefix(ins, "INSERT INTO `db`.`t` (flowStartSeconds, flowEndSeconds, ") || strings.Contains(ins, "VALUES") {
		t.Errorf("insert statement %q", ins)
	}
}

func TestMissingAndAlter(t *testing.T) {
	have := map[string]bool{}
	for _, c := range Columns {
		have[c.Name] = true
	}
	if m := Missing(have); len(m) != 0 {
		t.Errorf("Missing = %v for a complete table", m)
	}
	delete(have, "proxySnatPort")
	delete(have, "sourcePodUID")
	m := Missing(have)
	if len(m) != 2 {
		t.Fatalf("Missing = %v", m)
	}
	if got := AlterAddColumns("d", "f", m); got != "ALTER TABLE `d`.`f` ADD COLUMN sourcePodUID String, ADD COLUMN proxySnatPort UInt16" {
		t.Errorf("AlterAddColumns = %q", got)
	}
}

func TestViews(t *testing.T) {
	stmts := ViewStatements("db", "flows", 0)
	if len(stmts) != 2*len(Views) {
		t.Fatalf("%d statements for %d views", len(stmts), len(Views))
	}
	for i, v := range Views {
		table, view := stmts[2*i], stmts[2*i+1]
		if !strings.HasPrefix(table, "CREATE TABLE IF NOT EXISTS `db`.`"+v.Table+"` (\n    timeInserted DateTime DEFAULT now(),\n    flowEndSeconds DateTime,") ||
			!strings.Contains(table, "clusterUUID String\n) ENGINE = SummingMergeTree()") || strings.Contains(table, "TTL") {
			t.Errorf("view table:\n%s", table)
		}
		if !strings.HasPrefix(view, "CREATE MATERIALIZED VIEW IF NOT EXISTS `db`.`"+v.Name+"` TO `db`.`"+v.Table+"` AS SELECT") ||
			!strings.Contains(view, "\nFROM `db`.`flows`\nGROUP BY timeInserted, flowEndSeconds,") {
			t.Errorf("view:\n%s", view)
		}
		for _, s := range v.Sums {
			if !strings.Contains(view, "sum("+s+") AS "+s+",") || !strings.Contains(table, s+" UInt64,") {
				t.Errorf("%s: %s is not summed into a UInt64", v.Name, s)
			}
		}
	}
	if s := Views[0].CreateTable("db", time.Hour); !strings.Contains(s, "\nTTL timeInserted + INTERVAL 3600 SECOND") {
		t.Errorf("ttl 1h not in view table DDL:\n%s", s)
	}
}

func TestParseDistributed(t *testing.T) {
	for _, c := range []struct {
		engine string
		want   Distributed
		ok     bool
	}{
		{`Distributed(\'{cluster}\', default, flows_local, rand())`, Distributed{"{cluster}", "default", "flows_local"}, true},
		{"Distributed('c1', 'db2', 'l')", Distributed{"c1", "db2", "l"}, true},
		{"Distributed(c1, currentDatabase(), l, rand())", Distributed{"c1", "db", "l"}, true},
		{"MergeTree() PARTITION BY toYYYYMMDD(timeInserted) ORDER BY (timeInserted, flowEndSeconds)", Distributed{}, false},
		{"", Distributed{}, false},
	} {
		got, ok := ParseDistributed(c.engine, "db")
		if got != c.want || ok != c.ok {
			t.Errorf("ParseDistributed(%q) = %+v, %v; want %+v, %v", c.engine, got, ok, c.want, c.ok)
		}
	}
	if m := (Distributed{Cluster: "{cluster}"}).Macro(); m != "cluster" {
		t.Errorf("Macro = %q", m)
	}
	if m := (Distributed{Cluster: "c1"}).Macro(); m != "" {
		t.Errorf("Macro = %q", m)
	}
}

func TestClusterAlters(t *testing.T) {
	d := Distributed{Cluster: "c1", Database: "default", Table: "flows_local"}
	col := func(name string) Column {
		for _, c := range Columns {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no column %s", name)
		return Column{}
	}
	node, state := col("egressNodeName"), col("correlationState")
	got := ClusterAlters("default", "flows", d, []Column{node, state}, []Column{state})
	want := []string{
		"ALTER TABLE `default`.`flows_local` ON CLUSTER `c1` ADD COLUMN egressNodeName String, ADD COLUMN correlationState String",
		"ALTER TABLE `default`.`flows` ON CLUSTER `c1` ADD COLUMN correlationState String",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ClusterAlters =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := ClusterAlters("default", "flows", d, nil, []Column{state}); len(got) != 1 || !strings.HasPrefix(got[0], "ALTER TABLE `default`.`flows` ON") {
		t.Errorf("only the Distributed table lacks a column: %q", got)
	}
}
