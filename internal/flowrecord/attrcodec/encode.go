package attrcodec

import (
	"encoding/hex"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// Encode writes r into lr: EventName, Timestamp (flow end), ObservedTimestamp
// (export time), TraceID (hash of the correlation key, when there is one) and
// the attributes of the catalogue. lr's previous attributes are cleared, and
// its Body (a record that was compact).
func Encode(r *flowrecord.Record, lr plog.LogRecord) {
	lr.SetEventName(flowrecord.EventName)
	lr.SetTimestamp(catalogue.LogTimestamp(r.End))
	lr.SetObservedTimestamp(catalogue.LogTimestamp(r.Observed))
	if r.Key != "" {
		lr.SetTraceID(flowrecord.KeyHash(r.Key))
	} else {
		lr.SetTraceID(pcommon.NewTraceIDEmpty())
	}
	// The attributes are distinct by construction: a MapBuilder appends them
	// in catalogue order without the duplicate-key scan of Map.Put*, which is
	// quadratic in the number of attributes (~100 for an aggregated record).
	n := attributeCounts // upper bounds: zero values are omitted
	if r.Aggregation == nil {
		n = nonAggregationCounts
	}
	labels := len(r.Source.PodLabels) + len(r.Destination.PodLabels)
	e := newEncoder(n.attrs, labels, n.strs+labels, n.ints)
	for i := range attributes {
		if a := &attributes[i]; !a.aggregation || r.Aggregation != nil {
			encodeAttr(e, a, r)
		}
	}
	e.finish(lr.Attributes())
	if lr.Body().Type() != pcommon.ValueTypeEmpty {
		_ = lr.Body().FromRaw(nil) // nil cannot fail
	}
}

// encodeAttr appends the attribute a of r, unless its value is zero and a
// is not always written.
func encodeAttr(e *encoder, a *attribute, r *flowrecord.Record) {
	if a.derive != nil {
		e.str(a.Name, a.derive(r))
		return
	}
	p := a.ref.At(r) // Encode writes aggregation fields only when r.Aggregation is set
	switch a.ref.Kind {
	case catalogue.KindString:
		if s := *p.String(); s != "" {
			e.str(a.Name, s)
		}
	case catalogue.KindAddr:
		if addr := *p.Addr(); addr.IsValid() {
			e.str(a.Name, addrString(addr))
		}
	case catalogue.KindEnum:
		if v := *p.Uint8(); v != 0 {
			e.str(a.Name, flowrecord.EnumName(a.ref.Names, v))
		}
	case catalogue.KindTime:
		if t := p.Time(); !t.IsZero() {
			e.int(a.Name, t.UnixNano())
		}
	case catalogue.KindUint8:
		e.uint(a, uint64(*p.Uint8()))
	case catalogue.KindUint16:
		e.uint(a, uint64(*p.Uint16()))
	case catalogue.KindUint32:
		e.uint(a, uint64(*p.Uint32()))
	case catalogue.KindUint64:
		e.uint(a, *p.Uint64())
	case catalogue.KindBool:
		if *p.Bool() {
			e.b.AppendEmpty(a.Name).SetBool(true)
		}
	case catalogue.KindLabels:
		if labels := *p.Labels(); labels != nil {
			e.labelsMap(a.Name, labels)
		}
	case catalogue.KindBytes16:
		if b := p.Bytes16(); *b != (catalogue.Bytes16{}) {
			e.str(a.Name, hex.EncodeToString(b[:]))
		}
	default:
		panic("attrcodec: attribute " + a.Name + " of kind " + a.ref.Kind.String())
	}
}

// uint writes the unsigned field a of value v: when not zero or always
// written. uint64 counters above 2^63-1 cannot be held by an int attribute;
// they saturate.
func (e *encoder) uint(a *attribute, v uint64) {
	if v != 0 || a.always {
		e.int(a.Name, int64(min(v, uint64(math.MaxInt64))))
	}
}
