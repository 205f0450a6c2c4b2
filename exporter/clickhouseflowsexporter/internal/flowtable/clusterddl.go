package flowtable

import (
	"fmt"
	"time"
)

// LocalSuffix names a Distributed table's local table on each server
// (Theia's flows_local under flows).
const LocalSuffix = "_local"

// ShardingKey spreads rows over the shards by connection: every record of a
// connection lands on one shard, and a retried block is split into the
// same per-shard blocks as the first try, which the replicated tables then
// recognise as duplicates (rand(), Theia's key, splits it anew each time).
const ShardingKey = "cityHash64(sourceIP, destinationIP, sourceTransportPort, destinationTransportPort, protocolIdentifier)"

// Cluster is the clustered schema in a database: on every server of the
// cluster a replicated local table per table, and a Distributed table
// over them under the table's own name.
type Cluster struct {
	Name, Database string
}

// onCluster is `database`.`table` ON CLUSTER `name`.
func (c Cluster) onCluster(table string) string {
	return QualifiedName(c.Database, table) + " ON CLUSTER " + Quote(c.Name)
}

// replicated is the engine of a replicated local table: its replicas share
// a ZooKeeper path per shard, named after the database and table (literal:
// the {database} and {table} macros are newer than ClickHouse 18.16).
func (c Cluster) replicated(engine, table string) string {
	return fmt.Sprintf("Replicated%s('/clickhouse/tables/{shard}/%s/%s', '{replica}')", engine, c.Database, table)
}

// CreateDatabase creates the database on every server.
func (c Cluster) CreateDatabase() string {
	return "CREATE DATABASE IF NOT EXISTS " + Quote(c.Database) + " ON CLUSTER " + Quote(c.Name)
}

// CreateLocalTable creates the flows table's local table on every server:
// CreateTable's columns, key and partitions, replicated.
func (c Cluster) CreateLocalTable(table string, ttl time.Duration) string {
	return createTable(c.onCluster(table+LocalSuffix), c.replicated("MergeTree", table+LocalSuffix), ttl)
}

// CreateDistributed creates the Distributed table named table over its
// local table on every server, with the local table's columns.
func (c Cluster) CreateDistributed(table, shardingKey string) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s AS %s\nENGINE = Distributed('%s', '%s', '%s', %s)",
		c.onCluster(table), QualifiedName(c.Database, table+LocalSuffix), c.Name, c.Database, table+LocalSuffix, shardingKey)
}

// AddColumns adds the columns to table on every server (ClickHouse 18.16
// knows no ADD COLUMN IF NOT EXISTS: the columns are those one server
// lacks). Run on the local table before the Distributed one: a Distributed
// table forwards every column it has.
func (c Cluster) AddColumns(table string, cols []Column) string {
	return alterAdd(c.onCluster(table), cols)
}

// ViewStatements create Theia's views in their clustered form, in order,
// per view: the replicated SummingMergeTree table (v.Table) on every
// server, the materialized view <v.Name>_local that fills it from the flows
// table's local table on the same server, and the Distributed table v.Name
// over the view tables, which the dashboards query.
func (c Cluster) ViewStatements(table string, ttl time.Duration) []string {
	var out []string
	for _, v := range Views {
		out = append(out,
			v.createTable(c.onCluster(v.Table), c.replicated("SummingMergeTree", v.Table), ttl),
			v.createView(c.onCluster(v.Name+LocalSuffix), QualifiedName(c.Database, v.Table), QualifiedName(c.Database, table+LocalSuffix)),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s AS %s\nENGINE = Distributed('%s', '%s', '%s', rand())",
				c.onCluster(v.Name), QualifiedName(c.Database, v.Table), c.Name, c.Database, v.Table))
	}
	return out
}
