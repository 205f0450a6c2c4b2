package dashboards

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
)

// Expander does to a panel's rawSql what Grafana and the
// grafana-clickhouse-datasource plugin do before ClickHouse sees it: the
// dashboard's variables (${name} or $name) first, then the plugin's macros,
// expanded as its pkg/macros does (time range in Unix seconds, interval in
// whole seconds, at least 1). Grafana cannot run here; the tests run the
// expanded queries on a real ClickHouse.
type Expander struct {
	From, To time.Time
	Interval time.Duration
	Vars     map[string]string
}

var (
	macroRe    = regexp.MustCompile(`\$__(\w+)(?:\(([^()]*)\))?`)
	variableRe = regexp.MustCompile(`\$\{(\w+)\}|\$([A-Za-z]\w*)`)
)

// Expand returns sql as ClickHouse receives it, or an error for an undefined
// variable, a macro the plugin does not have, or a $ left over.
func (g Expander) Expand(sql string) (string, error) {
	var err error
	sql = variableRe.ReplaceAllStringFunc(sql, func(m string) string {
		name := strings.Trim(m, "${}")
		v, ok := g.Vars[name]
		if !ok {
			err = fmt.Errorf("undefined dashboard variable %s", m)
		}
		return v
	})
	if err != nil {
		return "", err
	}
	dt := func(t time.Time) string { return fmt.Sprintf("toDateTime(%d)", t.Unix()) }
	dt64 := func(t time.Time) string { return fmt.Sprintf("fromUnixTimestamp64Milli(%d)", t.UnixMilli()) }
	date := func(t time.Time) string { return fmt.Sprintf("toDate('%s')", t.UTC().Format("2006-01-02")) }
	seconds := int(math.Max(g.Interval.Seconds(), 1))
	sql = macroRe.ReplaceAllStringFunc(sql, func(m string) string {
		parts := macroRe.FindStringSubmatch(m)
		name, args := parts[1], []string{}
		if parts[2] != "" {
			for _, a := range strings.Split(parts[2], ",") {
				args = append(args, strings.TrimSpace(a))
			}
		}
		need := func(n int) bool {
			if len(args) != n {
				err = fmt.Errorf("%s: %d arguments, want %d", m, len(args), n)
				return false
			}
			return true
		}
		switch name {
		case "fromTime":
			return dt(g.From)
		case "toTime":
			return dt(g.To)
		case "fromTime_ms":
			return dt64(g.From)
		case "toTime_ms":
			return dt64(g.To)
		case "timeFilter":
			if need(1) {
				return fmt.Sprintf("%s >= %s AND %s <= %s", args[0], dt(g.From), args[0], dt(g.To))
			}
		case "timeFilter_ms":
			if need(1) {
				return fmt.Sprintf("%s >= %s AND %s <= %s", args[0], dt64(g.From), args[0], dt64(g.To))
			}
		case "dateFilter":
			if need(1) {
				return fmt.Sprintf("%s >= %s AND %s <= %s", args[0], date(g.From), args[0], date(g.To))
			}
		case "timeInterval":
			if need(1) {
				return fmt.Sprintf("toStartOfInterval(toDateTime(%s), INTERVAL %d second)", args[0], seconds)
			}
		case "interval_s":
			return fmt.Sprint(seconds)
		default:
			err = fmt.Errorf("%s: not a macro this expander knows (fromTime, toTime, timeFilter, dateFilter, timeInterval, interval_s and their _ms forms)", m)
		}
		return m
	})
	if err == nil && strings.Contains(sql, "$") {
		err = fmt.Errorf("unexpanded $ left in %q", sql)
	}
	return sql, err
}
