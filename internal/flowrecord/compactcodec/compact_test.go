package compactcodec_test

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/benchcpu"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

func compactRoundTrip(t *testing.T, in *flowrecord.Record) *flowrecord.Record {
	t.Helper()
	lr := plog.NewLogRecord()
	compactcodec.Encode(in, lr)
	var out flowrecord.Record
	require.NoError(t, attrcodec.Decode(lr, &out))
	return &out
}

// Every field of Record, set to random values, comes back from the compact
// encoding as it was: counters above 2^63 and addresses with zones included,
// which the attribute form cannot carry.
func TestCompactRoundTripEveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 1))
	for i, in := range flowrecordtest.RandomRecords(t, rng, 200) {
		require.Equal(t, in, compactRoundTrip(t, in), "record %d", i)
	}
}

func TestCompactRoundTripFullAndMinimalRecords(t *testing.T) {
	full := flowrecordtest.EveryField()
	assert.Equal(t, full, compactRoundTrip(t, full))
	minimal := &flowrecord.Record{Protocol: 17, Source: flowrecord.Endpoint{Address: netip.MustParseAddr("fd00:10::5"), Port: 5353},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("fd00:10:1::7"), Port: 53}}
	out := compactRoundTrip(t, minimal)
	assert.Equal(t, minimal, out)
	assert.Nil(t, out.Aggregation)
	assert.Nil(t, out.Source.PodLabels)
}

// The compact record's LogRecord fields are those of the attribute form; its
// attributes are flow.key and the encoding, nothing else.
func TestEncodeCompactLogRecord(t *testing.T) {
	r := flowrecordtest.EveryField()
	attrs, compact := plog.NewLogRecord(), plog.NewLogRecord()
	attrcodec.Encode(r, attrs)
	compactcodec.Encode(r, compact)
	assert.Equal(t, attrs.EventName(), compact.EventName())
	assert.Equal(t, attrs.Timestamp(), compact.Timestamp())
	assert.Equal(t, attrs.ObservedTimestamp(), compact.ObservedTimestamp())
	assert.Equal(t, attrs.TraceID(), compact.TraceID())
	assert.Equal(t, map[string]any{catalogue.AttrKey: r.Key, compactcodec.AttrRecordEncoding: compactcodec.EncodingCompactV1}, compact.Attributes().AsRaw())
	assert.Equal(t, pcommon.ValueTypeBytes, compact.Body().Type())
	assert.Equal(t, pcommon.ValueTypeEmpty, attrs.Body().Type())

	keyless := flowrecordtest.EveryField()
	keyless.Key = ""
	compactcodec.Encode(keyless, compact)
	assert.Equal(t, map[string]any{compactcodec.AttrRecordEncoding: compactcodec.EncodingCompactV1}, compact.Attributes().AsRaw())
	assert.True(t, compact.TraceID().IsEmpty())
}

// One LogRecord encoded in one form, then the other (the gateway rewrites
// what it received), holds only the second.
func TestEncodingsReplaceEachOther(t *testing.T) {
	r := flowrecordtest.EveryField()
	lr := plog.NewLogRecord()
	compactcodec.Encode(r, lr)
	attrcodec.Encode(r, lr)
	assert.Equal(t, pcommon.ValueTypeEmpty, lr.Body().Type(), "the compact body is cleared")
	_, ok := lr.Attributes().Get(compactcodec.AttrRecordEncoding)
	assert.False(t, ok)
	var out flowrecord.Record
	require.NoError(t, attrcodec.Decode(lr, &out))
	assert.Equal(t, r, &out)

	compactcodec.Encode(r, lr)
	assert.Equal(t, 2, lr.Attributes().Len(), "the attributes are replaced")
	require.NoError(t, attrcodec.Decode(lr, &out))
	assert.Equal(t, r, &out)
}

// The compact form is what makes the hop cheap: a node record is one value of
// a few hundred bytes instead of ~40 attributes, less than half the OTLP bytes.
func TestCompactIsSmaller(t *testing.T) {
	size := func(encode func(*flowrecord.Record, plog.LogRecord)) int {
		ld := plog.NewLogs()
		encode(flowrecordtest.NodeHalf(), ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
		var m plog.ProtoMarshaler
		return m.LogsSize(ld)
	}
	attrs, compact := size(attrcodec.Encode), size(compactcodec.Encode)
	t.Logf("node record in OTLP: %d bytes as attributes, %d compact", attrs, compact)
	assert.Less(t, 2*compact, attrs)
}

// An attrcodec.Decoder reads attribute-form and compact records in any order (a gateway
// during a rollout), reusing the label maps of the previous record either way.
func TestDecoderMixedEncodings(t *testing.T) {
	other := flowrecordtest.EveryField()
	other.Source.PodLabels = map[string]string{"only": "this"}
	other.Destination.PodLabels = map[string]string{}
	bare := flowrecordtest.EveryField()
	bare.Source.PodLabels, bare.Destination.PodLabels = nil, nil
	var d attrcodec.Decoder
	var r flowrecord.Record
	encoders := []func(*flowrecord.Record, plog.LogRecord){compactcodec.Encode, attrcodec.Encode}
	for i, in := range []*flowrecord.Record{flowrecordtest.EveryField(), other, bare, flowrecordtest.EveryField(), other, flowrecordtest.EveryField()} {
		lr := plog.NewLogRecord()
		encoders[i%2](in, lr)
		prev := r.Source.PodLabels
		require.NoError(t, d.Decode(lr, &r))
		assert.Equal(t, in, &r, "record %d", i)
		if prev != nil && in.Source.PodLabels != nil {
			assert.Equal(t, reflect.ValueOf(prev).Pointer(), reflect.ValueOf(r.Source.PodLabels).Pointer(), "record %d: the previous record's map is reused", i)
		}
	}
}

// FuzzCompactRoundTrip: attrcodec.Decode(compactcodec.Encode(r)) == r for any record.
func FuzzCompactRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x05\x04\x03\x02\x01\x00\xff\xfe\xfd\xfc\xfb\xfa\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0"))
	f.Add(make([]byte, 600))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := flowrecordtest.FromBytes(data)
		if len(data) > 0 && data[0]%2 == 1 {
			in.Source.Address = in.Source.Address.WithZone(in.Source.NodeName) // "" removes it
		}
		lr := plog.NewLogRecord()
		compactcodec.Encode(in, lr)
		var out flowrecord.Record
		if err := attrcodec.Decode(lr, &out); err != nil {
			t.Fatalf("decode of a compact record failed: %v", err)
		}
		if !reflect.DeepEqual(in, &out) {
			t.Fatalf("round trip changed the record:\n in=%+v\nout=%+v", in, &out)
		}
	})
}

// FuzzDecodeCompact: decoding any body under any encoding name never panics;
// what decodes encodes and decodes again to the same record.
func FuzzDecodeCompact(f *testing.F) {
	lr := plog.NewLogRecord()
	compactcodec.Encode(flowrecordtest.EveryField(), lr)
	f.Add(lr.Body().Bytes().AsRaw(), compactcodec.EncodingCompactV1)
	compactcodec.Encode(flowrecordtest.NodeHalf(), lr)
	f.Add(lr.Body().Bytes().AsRaw(), compactcodec.EncodingCompactV1)
	f.Add([]byte{0, 6, 4, 10, 0, 0, 1}, compactcodec.EncodingCompactV1)
	f.Add([]byte{0xff, 0xff}, "compact/0")
	f.Fuzz(func(t *testing.T, body []byte, encoding string) {
		lr := plog.NewLogRecord()
		lr.Attributes().PutStr(compactcodec.AttrRecordEncoding, encoding)
		lr.Body().SetEmptyBytes().FromRaw(body)
		var r flowrecord.Record
		if err := attrcodec.Decode(lr, &r); err != nil {
			return
		}
		again := plog.NewLogRecord()
		compactcodec.Encode(&r, again)
		var out flowrecord.Record
		if err := attrcodec.Decode(again, &out); err != nil {
			t.Fatalf("a decoded record does not decode after EncodeCompact: %v", err)
		}
		if !reflect.DeepEqual(&r, &out) {
			t.Fatalf("re-encoding changed the record:\n in=%+v\nout=%+v", &r, &out)
		}
	})
}

// The compact codec next to the attribute one (BenchmarkEncodeFullRecord and
// the others in bench_test.go).

func BenchmarkEncodeCompact(b *testing.B) {
	for _, c := range []struct {
		name string
		r    *flowrecord.Record
	}{{"full-record", flowrecordtest.EveryField()}, {"node-record", flowrecordtest.NodeHalf()}} {
		b.Run(c.name, func(b *testing.B) {
			lr := plog.NewLogRecord()
			benchcpu.Loop(b, func() { compactcodec.Encode(c.r, lr) })
		})
	}
}

func BenchmarkDecodeCompact(b *testing.B) {
	for _, c := range []struct {
		name string
		r    *flowrecord.Record
	}{{"full-record", flowrecordtest.EveryField()}, {"node-record", flowrecordtest.NodeHalf()}} {
		b.Run(c.name, func(b *testing.B) {
			lr := plog.NewLogRecord()
			compactcodec.Encode(c.r, lr)
			var r flowrecord.Record
			benchcpu.Loop(b, func() {
				if err := attrcodec.Decode(lr, &r); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
