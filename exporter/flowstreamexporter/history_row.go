package flowstreamexporter

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// The flows table's layout comes from the field catalogue, as the
// clickhouse_flows exporter's does (its flowtable package is built from the
// same catalogue.ClickHouseColumns): one source of truth for what is written
// and what is read back.

// endColumn is the record's end time; no attribute carries it (the
// LogRecord Timestamp does), so it has no Ref and is read by name.
const endColumn = "flowEndSeconds"

// historyColumn is a column read back into a Record.
type historyColumn struct {
	name string
	typ  catalogue.ColumnType
	ref  catalogue.Ref // zero for endColumn
}

// historyColumns are the columns a history query selects: each field's
// first column that holds the field's own value (a column carrying a value
// of its own, or a second copy of the same field, is not read back).
var historyColumns = buildHistoryColumns()

func buildHistoryColumns() []historyColumn {
	var out []historyColumn
	for _, f := range catalogue.Fields() {
		for _, c := range f.ClickHouse {
			if c.Name == endColumn {
				out = append(out, historyColumn{name: c.Name, typ: c.Type})
				continue
			}
			if f.Ref.Kind == catalogue.KindNone || c.Value.Kind != f.Value.Kind {
				continue
			}
			out = append(out, historyColumn{name: c.Name, typ: c.Type, ref: f.Ref})
			break
		}
	}
	return out
}

// historyRow holds one row as the driver scans it, one destination per column.
type historyRow struct {
	dest  []any
	times []time.Time
	u8s   []uint8
	u16s  []uint16
	u64s  []uint64
	strs  []string
}

func newHistoryRow() *historyRow {
	n := len(historyColumns)
	h := &historyRow{dest: make([]any, n),
		times: make([]time.Time, n), u8s: make([]uint8, n), u16s: make([]uint16, n), u64s: make([]uint64, n), strs: make([]string, n)}
	for i, c := range historyColumns {
		switch c.typ {
		case catalogue.DateTime:
			h.dest[i] = &h.times[i]
		case catalogue.UInt8:
			h.dest[i] = &h.u8s[i]
		case catalogue.UInt16:
			h.dest[i] = &h.u16s[i]
		case catalogue.UInt64:
			h.dest[i] = &h.u64s[i]
		default:
			h.dest[i] = &h.strs[i]
		}
	}
	return h
}

// record builds a new Record from the scanned row. Aggregation fields are
// set only when non-zero, so that a record written without aggregation
// reads back without it, as the ring holds it.
func (h *historyRow) record() (*flowrecord.Record, error) {
	r := new(flowrecord.Record)
	for i, c := range historyColumns {
		if c.ref.Kind == catalogue.KindNone {
			r.End = h.times[i].UTC()
			continue
		}
		if c.ref.Aggregation && h.zero(i, c.typ) {
			continue
		}
		if err := h.put(i, c, c.ref.At(r)); err != nil {
			return nil, fmt.Errorf("history: column %s: %w", c.name, err)
		}
	}
	return r, nil
}

func (h *historyRow) zero(i int, typ catalogue.ColumnType) bool {
	switch typ {
	case catalogue.DateTime:
		return h.times[i].Unix() <= 0
	case catalogue.UInt8:
		return h.u8s[i] == 0
	case catalogue.UInt16:
		return h.u16s[i] == 0
	case catalogue.UInt64:
		return h.u64s[i] == 0
	}
	return h.strs[i] == ""
}

// put writes column i's value into the field at p, of kind c.ref.Kind.
func (h *historyRow) put(i int, c historyColumn, p catalogue.Loc) error {
	switch c.ref.Kind {
	case catalogue.KindTime:
		*p.Time() = timeOf(h.times[i])
	case catalogue.KindUint8:
		*p.Uint8() = h.u8s[i]
	case catalogue.KindUint16:
		*p.Uint16() = h.u16s[i]
	case catalogue.KindUint64:
		*p.Uint64() = h.u64s[i]
	case catalogue.KindString:
		*p.String() = h.strs[i]
	case catalogue.KindEnum:
		if c.typ == catalogue.UInt8 {
			*p.Uint8() = h.u8s[i]
			return nil
		}
		if h.strs[i] == "" {
			return nil
		}
		v, ok := flowrecord.ParseEnum[uint8](c.ref.Names, h.strs[i])
		if !ok {
			return fmt.Errorf("unknown value %q (want one of %v)", h.strs[i], c.ref.Names[1:])
		}
		*p.Uint8() = v
	case catalogue.KindAddr:
		a, err := addrOf(h.strs[i])
		if err != nil {
			return err
		}
		*p.Addr() = a
	case catalogue.KindLabels:
		m, err := labelsOf(h.strs[i])
		if err != nil {
			return err
		}
		*p.Labels() = m
	default:
		return fmt.Errorf("no way to read a %s field from a %s column", c.ref.Kind, c.typ)
	}
	return nil
}

// timeOf is a DateTime column's value; 0 (1970) is "unknown", the zero time.
func timeOf(t time.Time) time.Time {
	if t.Unix() <= 0 {
		return time.Time{}
	}
	return t.UTC()
}

// labelsOf reads Pod labels as the exporter writes them: a JSON object, ""
// when there are none.
func labelsOf(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	m := map[string]string{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("labels are not a JSON object of strings (%w)", err)
	}
	return m, nil
}

// addrOf reads a textual address, "" when unset.
func addrOf(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	return netip.ParseAddr(strings.TrimSpace(s))
}
