package flowstreamexporter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// insertSkew is how long before its end time a row may have been inserted
// (the Nodes' clocks against ClickHouse's): the query's bound on
// timeInserted, the table's partition and primary key, which lets ClickHouse
// skip the parts older than since instead of reading every row.
const insertSkew = time.Hour

// historyWhere are the conditions of a stream's history from lower (its
// since, then each chunk's start) on: the rows whose end is not before
// lower, in the stream's scope and passing its filters. They select a
// superset of what the stream sends: each row is then checked in Go by the
// same code as a live record (scope, tiers, redaction, filters on the
// redacted record), so what SQL cannot express (IP prefixes, label
// selectors) or what redaction changes is decided there, never by SQL alone.
func historyWhere(q *query, lower int64) []string {
	var where []string
	if lower > 0 {
		where = append(where,
			fmt.Sprintf("flowEndSeconds >= toDateTime(%d)", lower),
			fmt.Sprintf("timeInserted >= toDateTime(%d)", max(lower-int64(insertSkew/time.Second), 0)))
	}
	if !q.scope.clusterWide {
		ns := sqlString(q.scope.namespace)
		where = append(where, fmt.Sprintf("(sourcePodNamespace = %s OR destinationPodNamespace = %s)", ns, ns))
	}
	for i := range q.filters {
		if c := filterSQL(&q.filters[i]); c != "" {
			where = append(where, c)
		}
	}
	return where
}

// chunkPlanSQL reads, for the first seconds of end time from lower on, how
// many rows end in each and when they were inserted: narrow columns, so
// ClickHouse scans them fast, and the chunk's rows can then be read by the
// table's primary key (timeInserted) instead of every column of every row.
func chunkPlanSQL(database, table string, where []string, seconds int) string {
	return fmt.Sprintf("SELECT toUInt32(flowEndSeconds) AS e, toUInt32(min(timeInserted)), toUInt32(max(timeInserted)), count() FROM `%s`.`%s`%s GROUP BY e ORDER BY e LIMIT %d",
		database, table, whereClause(where), seconds)
}

// chunkRowsSQL reads the rows of a planned chunk, oldest end first.
func chunkRowsSQL(database, table string, where []string, c chunk, limit int) string {
	cols := make([]string, len(historyColumns))
	for i, col := range historyColumns {
		cols[i] = col.name
	}
	where = append(slices.Clone(where),
		fmt.Sprintf("timeInserted >= toDateTime(%d) AND timeInserted <= toDateTime(%d)", c.insertedFrom, c.insertedTo))
	if c.end > 0 {
		where = append(where, fmt.Sprintf("flowEndSeconds < toDateTime(%d)", c.end))
	}
	return fmt.Sprintf("SELECT %s FROM `%s`.`%s`%s ORDER BY flowEndSeconds LIMIT %d",
		strings.Join(cols, ", "), database, table, whereClause(where), limit)
}

func whereClause(where []string) string {
	if len(where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(where, " AND ")
}

// filterSQL is the part of a filter SQL can decide on the stored
// (unredacted) row without leaving out a row the filter passes once
// redacted; "" when there is none.
func filterSQL(f *filter) string {
	var and []string
	if len(f.flowTypes) > 0 {
		vals := make([]string, len(f.flowTypes))
		for i, t := range f.flowTypes {
			vals[i] = strconv.Itoa(int(t))
		}
		and = append(and, "flowType IN ("+strings.Join(vals, ", ")+")")
	}
	if len(f.services) > 0 {
		// destinationServicePortName is "namespace/name:port".
		and = append(and, "splitByChar(':', splitByChar('/', destinationServicePortName)[2])[1] IN ("+sqlList(f.services)+")")
	}
	if c := endpointsSQL(f); c != "" {
		and = append(and, c)
	}
	return strings.Join(and, " AND ")
}

// endpointsSQL is the condition on the endpoints the filter applies to
// (either one with direction BOTH); "" when one of them passes any row.
func endpointsSQL(f *filter) string {
	var or []string
	for _, side := range []struct {
		on   bool
		name string
	}{{f.from, "source"}, {f.to, "destination"}} {
		if !side.on {
			continue
		}
		c := endpointSQL(f, side.name)
		if c == "" {
			return ""
		}
		or = append(or, c)
	}
	if len(or) == 0 {
		return ""
	}
	return "(" + strings.Join(or, " OR ") + ")"
}

// endpointSQL is the condition on one endpoint's Namespace and Pod name;
// "" when it has none. A Namespace list holding "" is not pushed down: a
// denied connection's redacted peer has no Namespace, whatever is stored.
func endpointSQL(f *filter, side string) string {
	var and []string
	if len(f.namespaces) > 0 && !slices.Contains(f.namespaces, "") {
		and = append(and, side+"PodNamespace IN ("+sqlList(f.namespaces)+")")
	}
	if len(f.podNames) > 0 {
		and = append(and, side+"PodName IN ("+sqlList(f.podNames)+")")
	}
	return strings.Join(and, " AND ")
}

func sqlList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = sqlString(v)
	}
	return strings.Join(q, ", ")
}

// sqlString is a ClickHouse string literal: backslash and quote escaped.
func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
