package clickhouseflowsexporter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
)

// createSchema creates the database and the flows table when missing.
func (e *flowsExporter) createSchema(ctx context.Context) error {
	if err := e.conn.Exec(ctx, flowtable.CreateDatabase(e.cfg.Database)); err != nil {
		return fmt.Errorf("database: cannot create %s (%w); let the user create databases, or create it and set create_schema: false",
			flowtable.Quote(e.cfg.Database), err)
	}
	if e.cfg.TTL > 0 && !e.version.SupportsTTL() {
		e.logger.Warn("ttl is ignored: this ClickHouse server does not support table TTLs (they need 19.6 or newer)",
			zap.Stringer("server_version", e.version), zap.Duration("ttl", e.cfg.TTL))
	}
	if err := e.conn.Exec(ctx, flowtable.CreateTable(e.cfg.Database, e.cfg.Table, e.ttl())); err != nil {
		return fmt.Errorf("table: cannot create %s (%w); let the user create tables, or create it (DDL in the README) and set create_schema: false", e.table, err)
	}
	return nil
}

// ttl is the configured TTL if the server supports table TTLs, else 0.
func (e *flowsExporter) ttl() time.Duration {
	if e.cfg.TTL > 0 && !e.version.SupportsTTL() {
		return 0
	}
	return e.cfg.TTL
}

// createViews creates Theia's views over the flows table when missing. On a
// Distributed table (Theia's clustered schema) it creates none: Theia's own
// are there, each server's over its local table.
func (e *flowsExporter) createViews(ctx context.Context) error {
	engine, err := e.engine(ctx, e.cfg.Database, e.cfg.Table)
	if err != nil {
		return err
	}
	if _, ok := flowtable.ParseDistributed(engine, e.cfg.Database); ok {
		e.logger.Info("The flows table is Distributed: Theia's views are not created over it (create them on each server over the local table, see docs/clickhouse.md)",
			zap.String("table", e.table))
		return nil
	}
	for _, stmt := range flowtable.ViewStatements(e.cfg.Database, e.cfg.Table, e.ttl()) {
		if err := e.conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("theia_views: cannot create Theia's views over %s (%w: %s); let the user create tables and views, or create them (docs/clickhouse.md) and set theia_views: false",
				e.table, err, firstLine(stmt))
		}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// engine is system.tables.engine_full of a table ("" when it does not exist).
func (e *flowsExporter) engine(ctx context.Context, database, table string) (string, error) {
	// Names are validated identifiers (or read from the server), so they can be inlined as literals.
	q := fmt.Sprintf("SELECT engine_full FROM system.tables WHERE database = '%s' AND name = '%s'", database, table)
	rows, err := e.conn.Query(ctx, q)
	if err != nil {
		return "", fmt.Errorf("table: cannot read the engine of %s (%w); let the user read system.tables", flowtable.QualifiedName(database, table), err)
	}
	defer rows.Close()
	var engine string
	for rows.Next() {
		if err := rows.Scan(&engine); err != nil {
			return "", fmt.Errorf("table: cannot read the engine of %s (%w); let the user read system.tables", flowtable.QualifiedName(database, table), err)
		}
	}
	return engine, rows.Err()
}

// columns are the names and types of a table's columns (empty when it does not exist).
func (e *flowsExporter) columns(ctx context.Context, database, table string) (map[string]string, error) {
	q := fmt.Sprintf("SELECT name, type FROM system.columns WHERE database = '%s' AND table = '%s'", database, table)
	readErr := func(err error) error {
		return fmt.Errorf("table: cannot read the columns of %s (%w); let the user read system.columns", flowtable.QualifiedName(database, table), err)
	}
	rows, err := e.conn.Query(ctx, q)
	if err != nil {
		return nil, readErr(err)
	}
	defer rows.Close()
	types := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, readErr(err)
		}
		types[name] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, readErr(err)
	}
	return types, nil
}

// verifyTable fails with a clear error when the database or table is missing
// or lacks a column we write, instead of letting every insert fail later.
func (e *flowsExporter) verifyTable(ctx context.Context) error {
	var n uint64
	q := fmt.Sprintf("SELECT count() FROM system.databases WHERE name = '%s'", e.cfg.Database)
	if err := e.conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return fmt.Errorf("database: cannot check that %s exists (%w); let the user read system.databases", flowtable.Quote(e.cfg.Database), err)
	}
	if n == 0 {
		return fmt.Errorf("database: does not exist on %s (got %s); create it, or set create_schema: true",
			e.cfg.Endpoint, flowtable.Quote(e.cfg.Database))
	}
	types, err := e.columns(ctx, e.cfg.Database, e.cfg.Table)
	if err != nil {
		return err
	}
	if len(types) == 0 {
		return fmt.Errorf("table: does not exist on %s (got %s); create it (DDL in the README), or set create_schema: true",
			e.cfg.Endpoint, e.table)
	}
	engine, err := e.engine(ctx, e.cfg.Database, e.cfg.Table)
	if err != nil {
		return err
	}
	missing := flowtable.Missing(has(types))
	if d, ok := flowtable.ParseDistributed(engine, e.cfg.Database); ok {
		if err := e.verifyCluster(ctx, d, missing); err != nil {
			return err
		}
		if e.cfg.Cluster != "" {
			e.warnShardingKey(engine)
		}
	} else if e.cfg.Cluster != "" {
		return fmt.Errorf("table: cluster is set, but %s is not a Distributed table (got engine %q); point table at the Distributed table, or unset cluster for a table on one server",
			e.table, engine)
	} else if len(missing) > 0 {
		return fmt.Errorf("table: %s lacks column(s) %s that this exporter writes; add them with: %s",
			e.table, columnList(missing), flowtable.AlterAddColumns(e.cfg.Database, e.cfg.Table, missing))
	}
	for _, c := range flowtable.Columns {
		if t := types[c.Name]; !sameType(t, c.Type) {
			e.logger.Warn("A column of the flows table has another type than the one this exporter creates; inserts work if the server can convert the values",
				zap.String("table", e.table), zap.String("column", c.Name), zap.String("type", t), zap.String("expected", c.Type))
		}
	}
	return nil
}

// verifyCluster checks a Distributed flows table (Theia's clustered schema)
// and the local table it writes to on this server: both need every column,
// and the error names each table to alter, on the cluster, in order.
func (e *flowsExporter) verifyCluster(ctx context.Context, d flowtable.Distributed, missingDist []flowtable.Column) error {
	if m := d.Macro(); m != "" {
		var name string
		q := fmt.Sprintf("SELECT substitution FROM system.macros WHERE macro = '%s'", strings.ReplaceAll(m, "'", ""))
		if err := e.conn.QueryRow(ctx, q).Scan(&name); err == nil && name != "" {
			d.Cluster = name
		}
	}
	local, err := e.columns(ctx, d.Database, d.Table)
	if err != nil {
		return err
	}
	missingLocal := missingDist // the local table is not on this server: assume it is like the Distributed one
	if len(local) > 0 {
		missingLocal = flowtable.Missing(has(local))
	}
	if len(missingLocal) == 0 && len(missingDist) == 0 {
		return nil
	}
	stmts := flowtable.ClusterAlters(e.cfg.Database, e.cfg.Table, d, missingLocal, missingDist)
	for i := range stmts {
		stmts[i] = fmt.Sprintf("(%d) %s;", i+1, stmts[i])
	}
	return fmt.Errorf("table: %s is a Distributed table over %s on cluster %s, and they lack column(s) %s that this exporter writes; "+
		"add them on every server of the cluster, the local table first (inserts fail while a server's local table lacks a column the Distributed table has): %s "+
		"(without distributed DDL, run each statement without ON CLUSTER on every server)",
		e.table, flowtable.QualifiedName(d.Database, d.Table), flowtable.Quote(d.Cluster),
		columnList(union(missingLocal, missingDist)), strings.Join(stmts, " "))
}

func has(types map[string]string) map[string]bool {
	out := make(map[string]bool, len(types))
	for n := range types {
		out[n] = true
	}
	return out
}

func columnList(cs []flowtable.Column) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name + " " + c.Type
	}
	return strings.Join(names, ", ")
}

// union is a's columns, then b's that are not in a.
func union(a, b []flowtable.Column) []flowtable.Column {
	seen := map[string]bool{}
	out := make([]flowtable.Column, 0, len(a)+len(b))
	for _, c := range append(append([]flowtable.Column{}, a...), b...) {
		if !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c)
		}
	}
	return out
}

// sameType compares column types, accepting LowCardinality/DateTime-with-zone
// variants that Theia's or a user's table may use.
func sameType(have, want string) bool {
	have = strings.TrimSuffix(strings.TrimPrefix(have, "LowCardinality("), ")")
	return have == want || strings.HasPrefix(have, want+"(")
}
