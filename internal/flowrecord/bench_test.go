package flowrecord

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/benchcpu"
)

// loop runs op b.N times and reports its CPU time per op (the garbage
// collector's included): on a shared machine wall time mostly measures waiting.
func loop(b *testing.B, op func()) {
	b.ReportAllocs()
	cpu0 := benchcpu.Now()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64((benchcpu.Now()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// The targets (docs/architecture.md §6): ≤ 1 µs for each of encode
// and decode of a full record. Run with `make bench`.

func BenchmarkEncodeFullRecord(b *testing.B) {
	r := fullRecord()
	lr := plog.NewLogRecord()
	loop(b, func() { Encode(r, lr) })
}

func BenchmarkDecodeFullRecord(b *testing.B) { benchDecode(b, fullRecord()) }

// What Encode is measured against: pdata copying the same record, already
// encoded, into a new LogRecord (attribute arrays and value wrappers
// allocated, as Encode's are): what writing those attributes costs pdata itself.
func BenchmarkCopyFullRecord(b *testing.B) {
	src := plog.NewLogRecord()
	Encode(fullRecord(), src)
	loop(b, func() { src.CopyTo(plog.NewLogRecord()) })
}

// benchDecode measures decoding the attribute form of in with the function
// Decode and with a Decoder reused across records (the exporters' path).
func benchDecode(b *testing.B, in *Record) {
	lr := plog.NewLogRecord()
	Encode(in, lr)
	b.Run("Decode", func(b *testing.B) {
		var r Record
		loop(b, func() {
			if err := Decode(lr, &r); err != nil {
				b.Fatal(err)
			}
		})
	})
	decoder := func(lr plog.LogRecord) func(b *testing.B) {
		return func(b *testing.B) {
			var d Decoder
			var r Record
			loop(b, func() {
				if err := d.Decode(lr, &r); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
	b.Run("Decoder", decoder(lr))
	// What came over the wire (a gateway's flow_correlation): no string is
	// shared with the encoder.
	ld := plog.NewLogs()
	lr.CopyTo(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
	raw, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		b.Fatal(err)
	}
	if ld, err = (&plog.ProtoUnmarshaler{}).UnmarshalLogs(raw); err != nil {
		b.Fatal(err)
	}
	b.Run("DecoderWire", decoder(ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)))
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
	loop(b, func() { Encode(r, lr) })
}

func BenchmarkDecodeNodeRecord(b *testing.B) { benchDecode(b, nodeRecord()) }
