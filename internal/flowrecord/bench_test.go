package flowrecord

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
)

// The targets (architecture §6 via the foundation issue): ≤ 1 µs for each of encode
// and decode of a full record. Run with `make bench`.

func BenchmarkEncodeFullRecord(b *testing.B) {
	r := fullRecord()
	lr := plog.NewLogRecord()
	b.ReportAllocs()
	for b.Loop() {
		Encode(r, lr)
	}
}

func BenchmarkDecodeFullRecord(b *testing.B) {
	lr := plog.NewLogRecord()
	Encode(fullRecord(), lr)
	var r Record
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(lr, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCorrelationKey(b *testing.B) {
	r := fullRecord()
	b.ReportAllocs()
	for b.Loop() {
		_ = KeyHash(r.CorrelationKey())
	}
}

// nodeRecord is what a node collector typically emits: a Pod-to-Pod half with
// identities, Service and conntrack fields, no aggregation, labels or policies.
func nodeRecord() *Record {
	r := fullRecord()
	r.Aggregation = nil
	r.Source.PodLabels, r.Destination.PodLabels = nil, nil
	r.IngressPolicy, r.EgressPolicy, r.Egress, r.Origin = Policy{}, Policy{}, Egress{}, Origin{}
	r.Direction, r.Correlation, r.Evicted = DirectionUnset, CorrelationNone, false
	return r
}

func BenchmarkEncodeNodeRecord(b *testing.B) {
	r := nodeRecord()
	lr := plog.NewLogRecord()
	b.ReportAllocs()
	for b.Loop() {
		Encode(r, lr)
	}
}

func BenchmarkDecodeNodeRecord(b *testing.B) {
	lr := plog.NewLogRecord()
	Encode(nodeRecord(), lr)
	var r Record
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(lr, &r); err != nil {
			b.Fatal(err)
		}
	}
}
