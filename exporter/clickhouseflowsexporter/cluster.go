package clickhouseflowsexporter

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
)

// clusterSchemaComplete reports whether this server has the whole clustered
// schema already (the tables, the views when configured, every column), so
// that a start skips the ON CLUSTER statements, which wait for every server
// of the cluster: a gateway restarting while a ClickHouse server is down
// then starts.
func (e *flowsExporter) clusterSchemaComplete(ctx context.Context) (bool, error) {
	local := e.cfg.Table + flowtable.LocalSuffix
	want := []string{local, e.cfg.Table}
	if e.cfg.TheiaViews {
		for _, v := range flowtable.Views {
			want = append(want, v.Table, v.Name+flowtable.LocalSuffix, v.Name)
		}
	}
	q := fmt.Sprintf("SELECT count() FROM system.tables WHERE database = '%s' AND name IN ('%s')", e.cfg.Database, strings.Join(want, "', '"))
	var n uint64
	if err := e.conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return false, fmt.Errorf("table: cannot read system.tables (%w); let the user read it", err)
	}
	if n != uint64(len(want)) {
		return false, nil
	}
	for _, table := range []string{local, e.cfg.Table} {
		types, err := e.columns(ctx, e.cfg.Database, table)
		if err != nil {
			return false, err
		}
		if len(flowtable.Missing(has(types))) > 0 {
			return false, nil
		}
	}
	return true, nil
}

// createClusterSchema creates the clustered schema ON CLUSTER when missing
// (the database, the replicated local table, the Distributed table), and
// adds the columns an existing one lacks, to the local table first.
func (e *flowsExporter) createClusterSchema(ctx context.Context) error {
	c := e.clusterSchema()
	local := e.cfg.Table + flowtable.LocalSuffix
	if err := e.ddl(ctx, "database", c.CreateDatabase()); err != nil {
		return err
	}
	if e.cfg.TTL > 0 && !e.version.SupportsTTL() {
		e.logger.Warn("ttl is ignored: this ClickHouse server does not support table TTLs (they need 19.6 or newer)",
			zap.Stringer("server_version", e.version), zap.Duration("ttl", e.cfg.TTL))
	}
	if err := e.ddl(ctx, "table", c.CreateLocalTable(e.cfg.Table, e.ttl())); err != nil {
		return err
	}
	if err := e.addMissingColumns(ctx, c, local); err != nil {
		return err
	}
	if err := e.ddl(ctx, "table", c.CreateDistributed(e.cfg.Table, flowtable.ShardingKey)); err != nil {
		return err
	}
	return e.addMissingColumnsOnEachServer(ctx, e.cfg.Table)
}

// addMissingColumns adds, ON CLUSTER, the columns this exporter writes that
// table lacks on this server (an older flowtel's or Theia's schema). Nothing
// is dropped or changed.
func (e *flowsExporter) addMissingColumns(ctx context.Context, c flowtable.Cluster, table string) error {
	types, err := e.columns(ctx, e.cfg.Database, table)
	if err != nil {
		return err
	}
	missing := flowtable.Missing(has(types))
	if len(missing) == 0 {
		return nil
	}
	e.logger.Info("Adding the columns the table lacks, on every server of the cluster",
		zap.String("table", flowtable.QualifiedName(e.cfg.Database, table)), zap.String("cluster", e.cfg.Cluster),
		zap.String("columns", columnList(missing)))
	return e.ddl(ctx, "table", c.AddColumns(table, missing))
}

// addMissingColumnsOnEachServer adds the columns a Distributed table lacks
// on each server of the cluster, connecting to each: ClickHouse 18.16
// refuses ALTER … ON CLUSTER of a table that is not replicated when the
// cluster's shards are ("Table flows isn't replicated, but shard #1 is
// replicated according to its cluster definition").
func (e *flowsExporter) addMissingColumnsOnEachServer(ctx context.Context, table string) error {
	hosts, err := e.clusterHosts(ctx)
	if err != nil {
		return err
	}
	opts, err := e.options(ctx)
	if err != nil {
		return err
	}
	for _, host := range hosts {
		opts.Addr = []string{host}
		if err := e.addMissingColumnsOn(ctx, opts, table); err != nil {
			return err
		}
	}
	return nil
}

// addMissingColumnsOn adds, on the one server opts name, the columns table lacks there.
func (e *flowsExporter) addMissingColumnsOn(ctx context.Context, opts *clickhouse.Options, table string) error {
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return fmt.Errorf("cluster: cannot open a client for %s (%w)", opts.Addr[0], err)
	}
	defer conn.Close()
	q := fmt.Sprintf("SELECT name FROM system.columns WHERE database = '%s' AND table = '%s'", e.cfg.Database, table)
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("cluster: cannot read the columns of %s on %s (%w); the exporter adds missing columns to the Distributed table on each server of the cluster itself, so it must reach each (system.clusters names them)",
			flowtable.QualifiedName(e.cfg.Database, table), opts.Addr[0], err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		have[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	missing := flowtable.Missing(have)
	if len(missing) == 0 {
		return nil
	}
	stmt := flowtable.AlterAddColumns(e.cfg.Database, table, missing)
	e.logger.Info("Adding the columns the Distributed table lacks on a server of the cluster",
		zap.String("server", opts.Addr[0]), zap.String("table", flowtable.QualifiedName(e.cfg.Database, table)), zap.String("columns", columnList(missing)))
	if err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("table: cannot add the missing columns on %s (%w: %s); let the user alter tables, or run the statement on every server and set create_schema: false",
			opts.Addr[0], err, stmt)
	}
	return nil
}

// clusterHosts are the native-protocol addresses of the cluster's servers
// as the servers' remote_servers name them.
func (e *flowsExporter) clusterHosts(ctx context.Context) ([]string, error) {
	q := fmt.Sprintf("SELECT host_name, port FROM system.clusters WHERE cluster = '%s' ORDER BY shard_num, replica_num", e.cfg.Cluster)
	rows, err := e.conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("cluster: cannot read system.clusters (%w); let the user read it", err)
	}
	defer rows.Close()
	var hosts []string
	for rows.Next() {
		var host string
		var port uint16
		if err := rows.Scan(&host, &port); err != nil {
			return nil, fmt.Errorf("cluster: cannot read system.clusters (%w)", err)
		}
		hosts = append(hosts, net.JoinHostPort(host, strconv.Itoa(int(port))))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("cluster: %s is not a cluster of %s (got no servers in system.clusters); set the name of a cluster in the servers' remote_servers",
			flowtable.Quote(e.cfg.Cluster), e.cfg.Endpoint)
	}
	return hosts, nil
}

// createClusterViews creates Theia's views in their clustered form.
func (e *flowsExporter) createClusterViews(ctx context.Context) error {
	for _, stmt := range e.clusterSchema().ViewStatements(e.cfg.Table, e.ttl()) {
		if err := e.ddl(ctx, "theia_views", stmt); err != nil {
			return err
		}
	}
	return nil
}

func (e *flowsExporter) clusterSchema() flowtable.Cluster {
	return flowtable.Cluster{Name: e.cfg.Cluster, Database: e.cfg.Database}
}

// ddl runs a statement ON CLUSTER. The server answers with a row per server
// once each has run it (or fails naming the server that could not), so it
// is read as a query: the driver's Exec does not read those rows.
func (e *flowsExporter) ddl(ctx context.Context, setting, stmt string) error {
	rows, err := e.conn.Query(ctx, stmt)
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
	}
	if err != nil {
		return fmt.Errorf("%s: cannot run on cluster %s (%w: %s); check that every server of the cluster runs, that the servers configure <distributed_ddl> and ZooKeeper, and that the user may create tables, or create the schema (docs/clickhouse.md) and set create_schema: false",
			setting, flowtable.Quote(e.cfg.Cluster), err, firstLine(stmt))
	}
	return nil
}

// warnShardingKey warns when the Distributed table spreads rows at random
// (Theia's rand()): a retried insert is then split over the shards anew, so
// a shard that had taken its part of the first try gets other rows on the
// retry and keeps both.
func (e *flowsExporter) warnShardingKey(engineFull string) {
	if strings.Contains(engineFull, "rand()") {
		e.logger.Warn("The Distributed flows table shards rows at random: a retried insert that reached some shards is written twice on them. "+
			"Recreate it with a sharding key on the connection (docs/clickhouse.md, \"A cluster\") to have retries deduplicated",
			zap.String("table", e.table), zap.String("engine", engineFull))
	}
}

// insertTimes holds the timeInserted of the batches whose insert failed, by
// their block's fingerprint, so that the retry sends the same block (the
// server's now() would differ by the retry's delay), which the replicated
// tables recognise as a duplicate where the first try was written.
type insertTimes struct {
	mu     sync.Mutex
	byHash map[uint64]time.Time
	keep   time.Duration // how long a failed batch may still be retried
}

func newInsertTimes(keep time.Duration) *insertTimes {
	return &insertTimes{byHash: map[uint64]time.Time{}, keep: keep}
}

// get is the batch's timeInserted: the one of its failed try, else now.
func (t *insertTimes) get(fingerprint uint64, now time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, ok := t.byHash[fingerprint]; ok {
		return at
	}
	return now.UTC().Truncate(time.Second)
}

// failed keeps the batch's timeInserted for its retry, and forgets those
// too old to be retried still.
func (t *insertTimes) failed(fingerprint uint64, at, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byHash[fingerprint] = at
	for h, a := range t.byHash {
		if now.Sub(a) > t.keep {
			delete(t.byHash, h)
		}
	}
}

// done forgets a batch once written.
func (t *insertTimes) done(fingerprint uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byHash, fingerprint)
}

// len is how many failed batches are remembered.
func (t *insertTimes) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byHash)
}
