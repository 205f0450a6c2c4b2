package compactcodec

// Encoding: a Record into a log record's attributes and body bytes.

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/xpdata"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// buffers are scratch buffers for Encode's body.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Encode writes r into lr in the compact encoding: EventName, Timestamp,
// ObservedTimestamp and TraceID as the attribute form writes them, the
// attributes AttrRecordEncoding and flow.key (when r has a key; lr's previous
// attributes are cleared) and the rest of r as bytes in the Body.
// attrcodec.Decode reads it back; only flowtel's own components should be
// given it.
func Encode(r *flowrecord.Record, lr plog.LogRecord) {
	lr.SetEventName(flowrecord.EventName)
	lr.SetTimestamp(catalogue.LogTimestamp(r.End))
	lr.SetObservedTimestamp(catalogue.LogTimestamp(r.Observed))
	var b xpdata.MapBuilder
	if r.Key != "" {
		lr.SetTraceID(flowrecord.KeyHash(r.Key))
		b.EnsureCapacity(2)
		b.AppendEmpty(catalogue.AttrKey).SetStr(r.Key)
	} else {
		lr.SetTraceID(pcommon.NewTraceIDEmpty())
		b.EnsureCapacity(1)
	}
	b.AppendEmpty(AttrRecordEncoding).SetStr(EncodingCompactV1)
	b.UnsafeIntoMap(lr.Attributes())

	buf := buffers.Get().(*[]byte)
	w := writer{b: (*buf)[:0]}
	w.record(r)
	lr.Body().SetEmptyBytes().FromRaw(w.b) // copies
	*buf = w.b
	buffers.Put(buf)
}

type writer struct{ b []byte }

func (w *writer) u8(v uint8)       { w.b = append(w.b, v) }
func (w *writer) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *writer) boolean(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

func (w *writer) str(s string) {
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *writer) time(t time.Time) {
	if t.IsZero() {
		w.u8(0)
		return
	}
	w.b = binary.AppendVarint(w.b, t.UnixNano())
}

func (w *writer) addr(a netip.Addr) {
	switch {
	case !a.IsValid():
		w.u8(0)
	case a.Is4():
		w.u8(4)
		b := a.As4()
		w.b = append(w.b, b[:]...)
	default:
		b := a.As16()
		if z := a.Zone(); z != "" {
			w.u8(17)
			w.b = append(w.b, b[:]...)
			w.str(z)
			return
		}
		w.u8(16)
		w.b = append(w.b, b[:]...)
	}
}

func (w *writer) labels(m map[string]string) {
	if m == nil {
		w.u8(0)
		return
	}
	w.uvarint(uint64(len(m)) + 1)
	for k, v := range m {
		w.str(k)
		w.str(v)
	}
}

// record writes the version 1 body; reader.record reads it.
func (w *writer) record(r *flowrecord.Record) {
	w.fields(fields, r)
	if r.Aggregation == nil {
		w.u8(0)
		return
	}
	w.u8(1)
	w.fields(aggregationFields, r)
}

// fields writes fs of r (aggregation fields: of a Record with Aggregation).
func (w *writer) fields(fs []field, r *flowrecord.Record) {
	for i := range fs {
		p := fs[i].ref.At(r)
		switch fs[i].ref.Kind {
		case catalogue.KindUint8, catalogue.KindEnum:
			w.u8(*p.Uint8())
		case catalogue.KindBool:
			w.boolean(*p.Bool())
		case catalogue.KindUint16:
			w.uvarint(uint64(*p.Uint16()))
		case catalogue.KindUint32:
			w.uvarint(uint64(*p.Uint32()))
		case catalogue.KindUint64:
			w.uvarint(*p.Uint64())
		case catalogue.KindTime:
			w.time(*p.Time())
		case catalogue.KindString:
			w.str(*p.String())
		case catalogue.KindAddr:
			w.addr(*p.Addr())
		case catalogue.KindLabels:
			w.labels(*p.Labels())
		case catalogue.KindBytes16:
			if b := p.Bytes16(); *b == (catalogue.Bytes16{}) {
				w.u8(0)
			} else {
				w.u8(16)
				w.b = append(w.b, b[:]...)
			}
		default:
			panic("compactcodec: field " + fs[i].name + " of kind " + fs[i].ref.Kind.String())
		}
	}
}
