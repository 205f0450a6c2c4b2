package flowtable

import (
	"fmt"
	"strings"
	"time"
)

// Version is a ClickHouse server version.
type Version struct{ Major, Minor, Patch uint64 }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor uint64) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// SupportsTTL reports whether the server accepts a table TTL clause
// (introduced in ClickHouse 19.6; 18.16 rejects it with a syntax error).
func (v Version) SupportsTTL() bool { return v.AtLeast(19, 6) }

// Quote quotes an identifier with backticks (names are validated to need no escaping).
func Quote(name string) string { return "`" + name + "`" }

// QualifiedName is `database`.`table`.
func QualifiedName(database, table string) string { return Quote(database) + "." + Quote(table) }

// CreateDatabase is the statement that creates the database if it is missing.
func CreateDatabase(database string) string {
	return "CREATE DATABASE IF NOT EXISTS " + Quote(database)
}

// CreateTable is the statement that creates the flows table if it is missing:
// the layout of a table Theia creates (timeInserted first, trusted after
// egressIP), then egressNodeName (which Theia's table lacks), then flowtel's
// columns, with only types every version from 18.16 on accepts (DateTime,
// UInt*, String). A Theia table altered by AlterAddColumns (which appends)
// has the same order, so SELECT * and positional INSERT … SELECT * work
// between them. ttl > 0 adds a TTL on timeInserted; callers pass it only
// when Version.SupportsTTL.
func CreateTable(database, table string, ttl time.Duration) string {
	return createTable(QualifiedName(database, table), "MergeTree()", ttl)
}

// createTable is CreateTable's statement for target (a table, with ON
// CLUSTER) and engine.
func createTable(target, engine string, ttl time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n", target)
	b.WriteString("    timeInserted DateTime DEFAULT now()")
	for _, c := range Columns {
		fmt.Fprintf(&b, ",\n    %s %s", c.Name, c.Type)
		if c.Name == TrustedAfter {
			b.WriteString(",\n    trusted UInt8 DEFAULT 0")
		}
	}
	fmt.Fprintf(&b, "\n) ENGINE = %s\nPARTITION BY toYYYYMMDD(timeInserted)\nORDER BY (timeInserted, flowEndSeconds)", engine)
	writeTTL(&b, ttl)
	b.WriteString("\nSETTINGS index_granularity = 8192")
	return b.String()
}

// TrustedAfter is the column that Theia's never-written trusted column
// follows in a table Theia creates.
const TrustedAfter = "egressIP"

// writeTTL adds the TTL clause on timeInserted when ttl > 0.
func writeTTL(b *strings.Builder, ttl time.Duration) {
	if ttl > 0 {
		fmt.Fprintf(b, "\nTTL timeInserted + INTERVAL %d SECOND", int64(ttl/time.Second))
	}
}

// InsertStatement is the INSERT with the explicit column list that
// PrepareBatch needs (ClickHouse 18.16 returns no columns without it).
func InsertStatement(database, table string) string {
	names := make([]string, len(Columns))
	for i, c := range Columns {
		names[i] = c.Name
	}
	return fmt.Sprintf("INSERT INTO %s (%s)", QualifiedName(database, table), strings.Join(names, ", "))
}

// Missing returns the columns this exporter writes that are absent from an
// existing table whose column names are have.
func Missing(have map[string]bool) []Column {
	var out []Column
	for _, c := range Columns {
		if !have[c.Name] {
			out = append(out, c)
		}
	}
	return out
}

// AlterAddColumns is the statement that adds missing columns to an existing table.
func AlterAddColumns(database, table string, missing []Column) string {
	return alterAdd(QualifiedName(database, table), missing)
}

// alterAdd appends the missing columns to target (a table, with ON CLUSTER).
func alterAdd(target string, missing []Column) string {
	parts := make([]string, len(missing))
	for i, c := range missing {
		parts[i] = fmt.Sprintf("ADD COLUMN %s %s", c.Name, c.Type)
	}
	return fmt.Sprintf("ALTER TABLE %s %s", target, strings.Join(parts, ", "))
}

// InsertTimeStatement is InsertStatement with timeInserted as one more,
// last column: the exporter sets it (instead of the server's now()) so that
// a retried block is the same block, which replicated tables deduplicate.
func InsertTimeStatement(database, table string) string {
	return strings.TrimSuffix(InsertStatement(database, table), ")") + ", timeInserted)"
}
