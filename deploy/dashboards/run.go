package dashboards

import (
	"context"
	"fmt"
	"math"
	"reflect"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Row is one result row: column → value as the driver scans it (a
// whole-number Float64 as int64, so 20.0 compares as 20).
type Row map[string]any

// Run runs an expanded query and returns its columns and rows.
func Run(ctx context.Context, conn driver.Conn, sql string) ([]string, []Row, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, nil, fmt.Errorf("%w\n%s", err, sql)
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	cols := rows.Columns()
	var out []Row
	for rows.Next() {
		ptrs := make([]any, len(types))
		for i, ct := range types {
			ptrs[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, err
		}
		r := Row{}
		for i, c := range cols {
			v := reflect.ValueOf(ptrs[i]).Elem().Interface()
			if f, ok := v.(float64); ok && f == math.Trunc(f) {
				v = int64(f)
			}
			r[c] = v
		}
		out = append(out, r)
	}
	return cols, out, rows.Err()
}
