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

// historySQL is the query of a stream's history: the rows whose end is not
// before since, in the stream's scope and passing its filters, oldest end
// first, at most limit. The conditions select a superset of what the
// stream sends: each row is then checked in Go by the same code as a live
// record (scope, tiers, redaction, filters on the redacted record), so
// what SQL cannot express (IP prefixes, label selectors) or what redaction
// changes is decided there, never by SQL alone.
func historySQL(database, table string, q *query, limit int) string {
	cols := make([]string, len(historyColumns))
	for i, c := range historyColumns {
		cols[i] = c.name
	}
	var where []string
	if !q.since.IsZero() {
		s := q.since.Unix()
		where = append(where,
			fmt.Sprintf("flowEndSeconds >= toDateTime(%d)", s),
			fmt.Sprintf("timeInserted >= toDateTime(%d)", max(s-int64(insertSkew/time.Second), 0)))
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
	sql := fmt.Sprintf("SELECT %s FROM `%s`.`%s`", strings.Join(cols, ", "), database, table)
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	return sql + fmt.Sprintf(" ORDER BY flowEndSeconds LIMIT %d", limit)
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
