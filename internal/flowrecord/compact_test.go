package flowrecord

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// enumSizes are the enumerations of Record and how many values each has; a
// new enumeration must be added here (randomRecord fails until it is).
var enumSizes = map[reflect.Type]int{
	reflect.TypeFor[EndpointKind]():     len(endpointKindNames),
	reflect.TypeFor[EndReason]():        len(endReasonNames),
	reflect.TypeFor[FlowType]():         len(flowTypeNames),
	reflect.TypeFor[PolicyType]():       len(policyTypeNames),
	reflect.TypeFor[RuleAction]():       len(ruleActionNames),
	reflect.TypeFor[Side]():             len(sideNames),
	reflect.TypeFor[Direction]():        len(directionNames),
	reflect.TypeFor[CorrelationState](): len(correlationNames),
}

// randomRecord sets every field of a Record, found by reflection, to a random
// non-zero value (ClusterUID aside: it travels on the resource). A field added
// to Record is filled too, so a round trip that loses it fails.
func randomRecord(t testing.TB, rng *rand.Rand) *Record {
	var r Record
	fillRandom(t, rng, "Record", reflect.ValueOf(&r).Elem())
	return &r
}

func fillRandom(t testing.TB, rng *rand.Rand, path string, v reflect.Value) {
	nonZero := func(n uint64) uint64 { return 1 + rng.Uint64N(n) }
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Unix(0, int64(nonZero(math.MaxInt64-1))).UTC()))
		return
	case reflect.TypeFor[netip.Addr]():
		v.Set(reflect.ValueOf(randomAddr(rng)))
		return
	}
	if n, ok := enumSizes[v.Type()]; ok {
		v.SetUint(nonZero(uint64(n - 1)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := path + "." + v.Type().Field(i).Name
			if f != "Record.ClusterUID" {
				fillRandom(t, rng, f, v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillRandom(t, rng, path, v.Elem())
	case reflect.Map:
		m := map[string]string{}
		for range 1 + rng.IntN(4) {
			m[randomString(rng)] = randomString(rng)
		}
		v.Set(reflect.ValueOf(m))
	case reflect.String:
		v.SetString(randomString(rng))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Type().PkgPath() != "" {
			t.Fatalf("%s: %s is an enumeration randomRecord does not know: add it to enumSizes", path, v.Type())
		}
		v.SetUint(nonZero(math.MaxUint64 >> (64 - v.Type().Bits())))
	case reflect.Array:
		for i := range v.Len() {
			v.Index(i).SetUint(nonZero(255))
		}
	default:
		t.Fatalf("%s: randomRecord cannot fill a %s", path, v.Type())
	}
}

func randomString(rng *rand.Rand) string {
	b := make([]byte, 1+rng.IntN(40))
	for i := range b {
		b[i] = byte(rng.Uint32()) // any bytes: the encoding carries them as they are
	}
	return string(b)
}

func randomAddr(rng *rand.Rand) netip.Addr {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	switch rng.IntN(4) {
	case 0:
		return netip.AddrFrom4([4]byte(b[:4]))
	case 1:
		return netip.AddrFrom16(b).WithZone("eth0")
	case 2:
		return netip.AddrFrom16(netip.AddrFrom4([4]byte(b[:4])).As16()) // IPv4-mapped stays IPv4-mapped
	default:
		return netip.AddrFrom16(b)
	}
}

func compactRoundTrip(t *testing.T, in *Record) *Record {
	t.Helper()
	lr := plog.NewLogRecord()
	EncodeCompact(in, lr)
	var out Record
	require.NoError(t, Decode(lr, &out))
	return &out
}

// Every field of Record, set to random values, comes back from the compact
// encoding as it was: counters above 2^63 and addresses with zones included,
// which the attribute form cannot carry.
func TestCompactRoundTripEveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 1))
	for i := range 200 {
		in := randomRecord(t, rng)
		switch i % 3 {
		case 1:
			in.Aggregation = nil
		case 2:
			in.Source.PodLabels, in.Destination.PodLabels = nil, map[string]string{}
		}
		require.Equal(t, in, compactRoundTrip(t, in), "record %d", i)
	}
}

func TestCompactRoundTripFullAndMinimalRecords(t *testing.T) {
	full := fullRecord()
	assert.Equal(t, full, compactRoundTrip(t, full))
	minimal := &Record{Protocol: 17, Source: Endpoint{Address: netip.MustParseAddr("fd00:10::5"), Port: 5353},
		Destination: Endpoint{Address: netip.MustParseAddr("fd00:10:1::7"), Port: 53}}
	out := compactRoundTrip(t, minimal)
	assert.Equal(t, minimal, out)
	assert.Nil(t, out.Aggregation)
	assert.Nil(t, out.Source.PodLabels)
}

// The compact record's LogRecord fields are those of the attribute form; its
// attributes are flow.key and the encoding, nothing else.
func TestEncodeCompactLogRecord(t *testing.T) {
	r := fullRecord()
	attrs, compact := plog.NewLogRecord(), plog.NewLogRecord()
	Encode(r, attrs)
	EncodeCompact(r, compact)
	assert.Equal(t, attrs.EventName(), compact.EventName())
	assert.Equal(t, attrs.Timestamp(), compact.Timestamp())
	assert.Equal(t, attrs.ObservedTimestamp(), compact.ObservedTimestamp())
	assert.Equal(t, attrs.TraceID(), compact.TraceID())
	assert.Equal(t, map[string]any{AttrKey: r.Key, AttrRecordEncoding: EncodingCompactV1}, compact.Attributes().AsRaw())
	assert.Equal(t, pcommon.ValueTypeBytes, compact.Body().Type())
	assert.Equal(t, pcommon.ValueTypeEmpty, attrs.Body().Type())

	keyless := fullRecord()
	keyless.Key = ""
	EncodeCompact(keyless, compact)
	assert.Equal(t, map[string]any{AttrRecordEncoding: EncodingCompactV1}, compact.Attributes().AsRaw())
	assert.True(t, compact.TraceID().IsEmpty())
}

// One LogRecord encoded in one form, then the other (the gateway rewrites
// what it received), holds only the second.
func TestEncodingsReplaceEachOther(t *testing.T) {
	r := fullRecord()
	lr := plog.NewLogRecord()
	EncodeCompact(r, lr)
	Encode(r, lr)
	assert.Equal(t, pcommon.ValueTypeEmpty, lr.Body().Type(), "the compact body is cleared")
	_, ok := lr.Attributes().Get(AttrRecordEncoding)
	assert.False(t, ok)
	var out Record
	require.NoError(t, Decode(lr, &out))
	assert.Equal(t, r, &out)

	EncodeCompact(r, lr)
	assert.Equal(t, 2, lr.Attributes().Len(), "the attributes are replaced")
	require.NoError(t, Decode(lr, &out))
	assert.Equal(t, r, &out)
}

// The compact form is what makes the hop cheap: a node record is one value of
// a few hundred bytes instead of ~40 attributes, less than half the OTLP bytes.
func TestCompactIsSmaller(t *testing.T) {
	size := func(encode func(*Record, plog.LogRecord)) int {
		ld := plog.NewLogs()
		encode(nodeRecord(), ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
		var m plog.ProtoMarshaler
		return m.LogsSize(ld)
	}
	attrs, compact := size(Encode), size(EncodeCompact)
	t.Logf("node record in OTLP: %d bytes as attributes, %d compact", attrs, compact)
	assert.Less(t, 2*compact, attrs)
}

// compactBody is a body written field by field, to build malformed ones.
type compactBody struct{ compactWriter }

// untilSourceLabels writes a valid body up to the source's labels.
func (b *compactBody) untilSourceLabels() *compactBody {
	b.time(time.Unix(1, 0))
	b.u8(6)
	b.addr(netip.MustParseAddr("10.0.0.1"))
	b.uvarint(80)
	b.u8(uint8(EndpointPod))
	b.str("ns")
	b.str("pod")
	b.str("uid")
	return b
}

func compactLogRecord(body []byte) plog.LogRecord {
	lr := plog.NewLogRecord()
	lr.Attributes().PutStr(AttrRecordEncoding, EncodingCompactV1)
	lr.Body().SetEmptyBytes().FromRaw(body)
	return lr
}

func TestDecodeCompactMalformed(t *testing.T) {
	good := plog.NewLogRecord()
	EncodeCompact(fullRecord(), good)
	full := good.Body().Bytes().AsRaw()
	with := func(f func(b *compactBody)) []byte {
		b := &compactBody{}
		f(b)
		return b.b
	}
	tests := []struct {
		name    string
		lr      func() plog.LogRecord
		wantErr string
	}{
		{"unknown version", func() plog.LogRecord {
			lr := compactLogRecord(full)
			lr.Attributes().PutStr(AttrRecordEncoding, "compact/2")
			return lr
		}, `attribute "flowtel.record.encoding": unknown encoding (got "compact/2"; this collector reads "compact/1"); upgrade the gateways`},
		{"encoding not a string", func() plog.LogRecord {
			lr := compactLogRecord(full)
			lr.Attributes().PutInt(AttrRecordEncoding, 1)
			return lr
		}, `attribute "flowtel.record.encoding": want string, got Int`},
		{"bytes body without the encoding", func() plog.LogRecord {
			lr := plog.NewLogRecord()
			lr.Body().SetEmptyBytes().FromRaw(full)
			return lr
		}, `attribute "flowtel.record.encoding": missing on a record whose Body is bytes`},
		{"encoding without a bytes body", func() plog.LogRecord {
			lr := compactLogRecord(nil)
			lr.Body().SetStr("x")
			return lr
		}, `attribute "flowtel.record.encoding": "compact/1", but the Body is Str, want Bytes`},
		{"encoding and no body", func() plog.LogRecord {
			lr := plog.NewLogRecord()
			lr.Attributes().PutStr(AttrRecordEncoding, EncodingCompactV1)
			return lr
		}, `but the Body is Empty, want Bytes`},
		{"key not a string", func() plog.LogRecord {
			lr := compactLogRecord(full)
			lr.Attributes().PutInt(AttrKey, 1)
			return lr
		}, `attribute "flow.key": want string, got Int`},
		{"empty body", func() plog.LogRecord { return compactLogRecord([]byte{}) },
			`attribute "flowtel.record.encoding" compact/1: field "flow.start": the Body ends before it (truncated)`},
		{"trailing bytes", func() plog.LogRecord { return compactLogRecord(append(full, 0, 0)) },
			`field "body": 2 bytes after the last field`},
		{"too many labels", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) { b.untilSourceLabels().uvarint(MaxLabels + 2) }))
		}, fmt.Sprintf(`field "source.k8s.pod.labels": %d labels (at most %d)`, MaxLabels+1, MaxLabels)},
		{"labels past the end", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) { b.untilSourceLabels().uvarint(101); b.str("k") }))
		}, `field "source.k8s.pod.labels": 100 labels run past the end of the Body (2 bytes left)`},
		{"duplicate label", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) {
				b.untilSourceLabels().uvarint(3)
				b.str("k")
				b.str("v")
				b.str("k")
				b.str("w")
			}))
		}, `field "source.k8s.pod.labels": 2 labels, 1 of them distinct`},
		{"string past the end", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) {
				b.untilSourceLabels().u8(0)
				b.uvarint(300)
				b.str("short")
			}))
		}, `field "source.k8s.workload.kind": length 300 runs past the end of the Body (6 bytes left)`},
		{"port out of range", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) {
				b.time(time.Time{})
				b.u8(6)
				b.addr(netip.MustParseAddr("10.0.0.1"))
				b.uvarint(70000)
			}))
		}, `field "source.port": value 70000 out of range [0, 65535]`},
		{"unknown endpoint kind", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) {
				b.time(time.Time{})
				b.u8(6)
				b.addr(netip.MustParseAddr("10.0.0.1"))
				b.uvarint(80)
				b.u8(9)
			}))
		}, `field "flow.source.kind": unknown value 9 (want at most 3)`},
		{"bad address tag", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) { b.time(time.Time{}); b.u8(6); b.u8(5) }))
		}, `field "source.address": address tag 5, want 0, 4, 16 or 17`},
		{"address cut short", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) { b.time(time.Time{}); b.u8(6); b.u8(16); b.u8(1) }))
		}, `field "source.address": the Body ends before it (truncated)`},
		{"varint overflow", func() plog.LogRecord {
			return compactLogRecord([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
		}, `field "flow.start": varint overflows 64 bits`},
		{"aggregation presence", func() plog.LogRecord {
			b := fullRecord()
			b.Aggregation = nil
			lr := plog.NewLogRecord()
			EncodeCompact(b, lr)
			raw := lr.Body().Bytes().AsRaw()
			raw[len(raw)-1] = 2
			return compactLogRecord(raw)
		}, `field "flow.aggregation": presence byte is 2, want 0 or 1`},
		{"missing source address", func() plog.LogRecord {
			r := fullRecord()
			r.Source.Address = netip.Addr{}
			lr := plog.NewLogRecord()
			EncodeCompact(r, lr)
			return lr
		}, `missing required attribute "source.address"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Record
			err := Decode(tt.lr(), &r)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// Every truncation of a valid body is an error that names a field; none panics.
func TestDecodeCompactTruncated(t *testing.T) {
	lr := plog.NewLogRecord()
	EncodeCompact(fullRecord(), lr)
	full := lr.Body().Bytes().AsRaw()
	for n := range len(full) {
		var r Record
		err := Decode(compactLogRecord(full[:n]), &r)
		require.Error(t, err, "body cut at %d of %d bytes", n, len(full))
		assert.True(t, strings.Contains(err.Error(), `field "`) || strings.Contains(err.Error(), "missing required attribute"), err.Error())
	}
}

// A Decoder reads attribute-form and compact records in any order (a gateway
// during a rollout), reusing the label maps of the previous record either way.
func TestDecoderMixedEncodings(t *testing.T) {
	other := fullRecord()
	other.Source.PodLabels = map[string]string{"only": "this"}
	other.Destination.PodLabels = map[string]string{}
	bare := fullRecord()
	bare.Source.PodLabels, bare.Destination.PodLabels = nil, nil
	var d Decoder
	var r Record
	encoders := []func(*Record, plog.LogRecord){EncodeCompact, Encode}
	for i, in := range []*Record{fullRecord(), other, bare, fullRecord(), other, fullRecord()} {
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

// FuzzCompactRoundTrip: Decode(EncodeCompact(r)) == r for any record.
func FuzzCompactRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x05\x04\x03\x02\x01\x00\xff\xfe\xfd\xfc\xfb\xfa\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0"))
	f.Add(make([]byte, 600))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := recordFrom(data)
		if len(data) > 0 && data[0]%2 == 1 {
			in.Source.Address = in.Source.Address.WithZone(in.Source.NodeName) // "" removes it
		}
		lr := plog.NewLogRecord()
		EncodeCompact(in, lr)
		var out Record
		if err := Decode(lr, &out); err != nil {
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
	EncodeCompact(fullRecord(), lr)
	f.Add(lr.Body().Bytes().AsRaw(), EncodingCompactV1)
	EncodeCompact(nodeRecord(), lr)
	f.Add(lr.Body().Bytes().AsRaw(), EncodingCompactV1)
	f.Add([]byte{0, 6, 4, 10, 0, 0, 1}, EncodingCompactV1)
	f.Add([]byte{0xff, 0xff}, "compact/0")
	f.Fuzz(func(t *testing.T, body []byte, encoding string) {
		lr := plog.NewLogRecord()
		lr.Attributes().PutStr(AttrRecordEncoding, encoding)
		lr.Body().SetEmptyBytes().FromRaw(body)
		var r Record
		if err := Decode(lr, &r); err != nil {
			return
		}
		again := plog.NewLogRecord()
		EncodeCompact(&r, again)
		var out Record
		if err := Decode(again, &out); err != nil {
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
		r    *Record
	}{{"full-record", fullRecord()}, {"node-record", nodeRecord()}} {
		b.Run(c.name, func(b *testing.B) {
			lr := plog.NewLogRecord()
			loop(b, func() { EncodeCompact(c.r, lr) })
		})
	}
}

func BenchmarkDecodeCompact(b *testing.B) {
	for _, c := range []struct {
		name string
		r    *Record
	}{{"full-record", fullRecord()}, {"node-record", nodeRecord()}} {
		b.Run(c.name, func(b *testing.B) {
			lr := plog.NewLogRecord()
			EncodeCompact(c.r, lr)
			var r Record
			loop(b, func() {
				if err := Decode(lr, &r); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
