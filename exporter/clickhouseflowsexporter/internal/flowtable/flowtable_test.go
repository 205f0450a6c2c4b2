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
	if !strings.Contains(ddl, "clusterUUID String,\n    trusted UInt8 DEFAULT 0,\n    egressName String") {
		t.Error("trusted is not between clusterUUID and egressName, as in Antrea's table")
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
