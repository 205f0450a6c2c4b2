package flowtable

import (
	"regexp"
	"strings"
)

// Distributed is what the engine of a Distributed table names: the cluster
// and the local table it spreads rows over (Theia's clustered schema:
// `flows` over `flows_local` on cluster '{cluster}').
type Distributed struct {
	Cluster, Database, Table string
}

// distributedEngine matches system.tables.engine_full of a Distributed
// table: Distributed(cluster, database, table[, sharding key]).
var distributedEngine = regexp.MustCompile(`^Distributed\(\s*([^,]+?)\s*,\s*([^,]+?)\s*,\s*([^,)]+?)\s*[,)]`)

// ParseDistributed reads a Distributed engine's arguments from engine_full;
// a database given as an expression (currentDatabase()) or empty is database.
func ParseDistributed(engineFull, database string) (Distributed, bool) {
	m := distributedEngine.FindStringSubmatch(engineFull)
	if m == nil {
		return Distributed{}, false
	}
	d := Distributed{Cluster: unquote(m[1]), Database: unquote(m[2]), Table: unquote(m[3])}
	if d.Database == "" || strings.ContainsAny(d.Database, "()") {
		d.Database = database
	}
	return d, true
}

// unquote removes the quotes ClickHouse prints around a literal or identifier.
func unquote(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), `\'`, `'`)
	if len(s) >= 2 && strings.ContainsRune("'`\"", rune(s[0])) && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// Macro is the name of a macro a cluster argument refers to ("cluster" for
// Theia's '{cluster}'), or "".
func (d Distributed) Macro() string {
	if strings.HasPrefix(d.Cluster, "{") && strings.HasSuffix(d.Cluster, "}") {
		return d.Cluster[1 : len(d.Cluster)-1]
	}
	return ""
}

// ClusterAlters are the statements that add the missing columns to a
// clustered schema, in the order they must run: the local table on every
// server of the cluster first, then the Distributed table. (The other order
// breaks inserts: the Distributed table forwards the new columns to local
// tables that lack them.) Either list may be empty.
func ClusterAlters(database, table string, d Distributed, missingLocal, missingDist []Column) []string {
	var out []string
	if len(missingLocal) > 0 {
		out = append(out, alterOnCluster(d.Database, d.Table, d.Cluster, missingLocal))
	}
	if len(missingDist) > 0 {
		out = append(out, alterOnCluster(database, table, d.Cluster, missingDist))
	}
	return out
}

func alterOnCluster(database, table, cluster string, missing []Column) string {
	return alterAdd(QualifiedName(database, table)+" ON CLUSTER "+Quote(cluster), missing)
}
