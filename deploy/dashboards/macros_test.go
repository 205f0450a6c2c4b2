package dashboards_test

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
)

// grafana is what Grafana and the grafana-clickhouse-datasource plugin do to a
// panel's rawSql before ClickHouse sees it: the dashboard's variables
// (${name} or $name) first, then the plugin's macros, expanded as its
// pkg/macros documents them (time range in Unix seconds, interval at least 1 s).
type grafana struct {
	from, to time.Time
	interval time.Duration
	vars     map[string]string
}

var (
	macroRe    = regexp.MustCompile(`\$__(\w+)(?:\(([^()]*)\))?`)
	variableRe = regexp.MustCompile(`\$\{(\w+)\}|\$([A-Za-z]\w*)`)
)

func (g grafana) expand(sql string) (string, error) {
	var err error
	sql = variableRe.ReplaceAllStringFunc(sql, func(m string) string {
		name := strings.Trim(m, "${}")
		v, ok := g.vars[name]
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
	seconds := int(math.Max(g.interval.Seconds(), 1))
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
			return dt(g.from)
		case "toTime":
			return dt(g.to)
		case "fromTime_ms":
			return dt64(g.from)
		case "toTime_ms":
			return dt64(g.to)
		case "timeFilter":
			if need(1) {
				return fmt.Sprintf("%s >= %s AND %s <= %s", args[0], dt(g.from), args[0], dt(g.to))
			}
		case "timeFilter_ms":
			if need(1) {
				return fmt.Sprintf("%s >= %s AND %s <= %s", args[0], dt64(g.from), args[0], dt64(g.to))
			}
		case "dateFilter":
			if need(1) {
				return fmt.Sprintf("%s >= %s AND %s <= %s", args[0], date(g.from), args[0], date(g.to))
			}
		case "timeInterval":
			if need(1) {
				return fmt.Sprintf("toStartOfInterval(toDateTime(%s), INTERVAL %d second)", args[0], seconds)
			}
		case "interval_s":
			return fmt.Sprint(seconds)
		default:
			err = fmt.Errorf("%s: not a macro of the plugin this test knows", m)
		}
		return m
	})
	if err == nil && strings.Contains(sql, "$") {
		err = fmt.Errorf("unexpanded $ left in %q", sql)
	}
	return sql, err
}
