package flowrecord

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
)

// The targets (DESIGN §6 via the foundation issue): ≤ 1 µs for each of encode
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
