package flowtable

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// View is one of the aggregating views Theia's dashboards read: a
// materialized view over the flows table that writes the per-key sums of
// some columns into its own SummingMergeTree table. The names and columns are
// Theia's (docs/clickhouse.md, "Theia's views").
type View struct {
	// Name is the materialized view the dashboards query.
	Name string
	// Table is the SummingMergeTree table the view fills (Theia's name).
	Table string
	// Keys are the grouping columns after timeInserted and before
	// clusterUUID, which close the key; Sums the summed columns.
	Keys, Sums []string
}

// the end times every view keys on after timeInserted.
var viewTimes = []string{"flowEndSeconds", "flowEndSecondsFromSourceNode", "flowEndSecondsFromDestinationNode"}

// the per-Node throughputs of the Node and policy views.
var nodeSums = []string{
	"octetDeltaCount", "reverseOctetDeltaCount", "throughput", "reverseThroughput",
	"throughputFromSourceNode", "reverseThroughputFromSourceNode",
	"throughputFromDestinationNode", "reverseThroughputFromDestinationNode",
}

// Views are Theia's three views, in the order they are created.
var Views = []View{
	{
		Name: "flows_pod_view", Table: "pod_view_table_local",
		Keys: append(slices.Clone(viewTimes), "sourcePodName", "destinationPodName", "destinationIP",
			"destinationServicePort", "destinationServicePortName", "flowType",
			"sourcePodNamespace", "destinationPodNamespace", "sourceTransportPort", "destinationTransportPort"),
		Sums: []string{"octetDeltaCount", "reverseOctetDeltaCount", "throughput", "reverseThroughput",
			"throughputFromSourceNode", "throughputFromDestinationNode"},
	},
	{
		Name: "flows_node_view", Table: "node_view_table_local",
		Keys: append(slices.Clone(viewTimes), "sourceNodeName", "destinationNodeName", "sourcePodNamespace", "destinationPodNamespace"),
		Sums: nodeSums,
	},
	{
		Name: "flows_policy_view", Table: "policy_view_table_local",
		Keys: append(slices.Clone(viewTimes), "egressNetworkPolicyName", "egressNetworkPolicyNamespace", "egressNetworkPolicyRuleAction",
			"ingressNetworkPolicyName", "ingressNetworkPolicyNamespace", "ingressNetworkPolicyRuleAction",
			"sourcePodName", "sourceTransportPort", "sourcePodNamespace",
			"destinationPodName", "destinationTransportPort", "destinationPodNamespace",
			"destinationServicePort", "destinationServicePortName", "destinationIP"),
		Sums: nodeSums,
	},
}

// key is the view table's ORDER BY: timeInserted, the keys, clusterUUID.
func (v View) key() []string {
	return append(append([]string{"timeInserted"}, v.Keys...), "clusterUUID")
}

// columnType is the type of a flows table column written by the exporter.
func columnType(name string) string {
	for _, c := range Columns {
		if c.Name == name {
			return c.Type
		}
	}
	panic("flowtable: no column " + name) // the views name fixed columns; TestViews builds them
}

// CreateTable is the statement that creates the view's SummingMergeTree
// table if it is missing, its columns in Theia's order (timeInserted, keys,
// sums, clusterUUID). ttl > 0 adds the flows table's TTL (Version.SupportsTTL).
func (v View) CreateTable(database string, ttl time.Duration) string {
	return v.createTable(QualifiedName(database, v.Table), "SummingMergeTree()", ttl)
}

// createTable is CreateTable's statement for target (with ON CLUSTER) and engine.
func (v View) createTable(target, engine string, ttl time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n    timeInserted DateTime DEFAULT now()", target)
	for _, c := range append(append(slices.Clone(v.Keys), v.Sums...), "clusterUUID") {
		fmt.Fprintf(&b, ",\n    %s %s", c, columnType(c))
	}
	fmt.Fprintf(&b, "\n) ENGINE = %s\nPARTITION BY toYYYYMMDD(timeInserted)\nORDER BY (%s)", engine, strings.Join(v.key(), ", "))
	writeTTL(&b, ttl)
	return b.String()
}

// CreateView is the statement that creates the materialized view if it is
// missing: it sums the rows of each block inserted into table per key and
// writes them into the view's table.
func (v View) CreateView(database, table string) string {
	return v.createView(QualifiedName(database, v.Name), QualifiedName(database, v.Table), QualifiedName(database, table))
}

// createView is CreateView's statement for the view target (with ON
// CLUSTER), writing into viewTable, reading from table.
func (v View) createView(target, viewTable, table string) string {
	sel := make([]string, 0, len(v.Keys)+len(v.Sums)+2)
	sel = append(sel, "timeInserted")
	sel = append(sel, v.Keys...)
	for _, s := range v.Sums {
		sel = append(sel, fmt.Sprintf("sum(%s) AS %s", s, s))
	}
	sel = append(sel, "clusterUUID")
	return fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s TO %s AS SELECT\n    %s\nFROM %s\nGROUP BY %s",
		target, viewTable, strings.Join(sel, ",\n    "), table, strings.Join(v.key(), ", "))
}

// ViewStatements are the statements that create Theia's views over table,
// in order: each view's table before its view.
func ViewStatements(database, table string, ttl time.Duration) []string {
	var out []string
	for _, v := range Views {
		out = append(out, v.CreateTable(database, ttl), v.CreateView(database, table))
	}
	return out
}
