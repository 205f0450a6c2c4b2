package attrcodec

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/benchcpu"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// The targets (docs/architecture.md §6): ≤ 1 µs for each of encode
// and decode of a full record. Run with `make bench`.

func BenchmarkEncodeFullRecord(b *testing.B) {
	r := flowrecordtest.EveryField()
	lr := plog.NewLogRecord()
	benchcpu.Loop(b, func() { Encode(r, lr) })
}

func BenchmarkDecodeFullRecord(b *testing.B) { benchDecode(b, flowrecordtest.EveryField()) }

// What Encode is measured against: pdata copying the same record, already
// encoded, into a new LogRecord (attribute arrays and value wrappers
// allocated, as Encode's are): what writing those attributes costs pdata itself.
func BenchmarkCopyFullRecord(b *testing.B) {
	src := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), src)
	benchcpu.Loop(b, func() { src.CopyTo(plog.NewLogRecord()) })
}

// benchDecode measures decoding the attribute form of in with the function
// Decode and with a Decoder reused across records (the exporters' path).
func benchDecode(b *testing.B, in *flowrecord.Record) {
	lr := plog.NewLogRecord()
	Encode(in, lr)
	b.Run("Decode", func(b *testing.B) {
		var r flowrecord.Record
		benchcpu.Loop(b, func() {
			if err := Decode(lr, &r); err != nil {
				b.Fatal(err)
			}
		})
	})
	decoder := func(lr plog.LogRecord) func(b *testing.B) {
		return func(b *testing.B) {
			var d Decoder
			var r flowrecord.Record
			benchcpu.Loop(b, func() {
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
	r := flowrecordtest.EveryField()
	b.ReportAllocs()
	for b.Loop() {
		_ = flowrecord.KeyHash(r.CorrelationKey())
	}
}

func BenchmarkEncodeNodeRecord(b *testing.B) {
	r := flowrecordtest.NodeHalf()
	lr := plog.NewLogRecord()
	benchcpu.Loop(b, func() { Encode(r, lr) })
}

func BenchmarkDecodeNodeRecord(b *testing.B) { benchDecode(b, flowrecordtest.NodeHalf()) }
