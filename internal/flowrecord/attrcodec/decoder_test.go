package attrcodec

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// leaves calls visit with every field of v a record's codec writes on its
// own (strings, numbers, addresses, times, label maps, and the flowrecord.Aggregation
// pointer as well as its fields), found by reflection.
func leaves(v reflect.Value, visit func(reflect.Value)) {
	switch v.Type() {
	case reflect.TypeFor[time.Time](), reflect.TypeFor[netip.Addr]():
		visit(v)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type() != reflect.TypeFor[flowrecord.Record]() || v.Type().Field(i).Name != "ClusterUID" {
				leaves(v.Field(i), visit)
			}
		}
	case reflect.Pointer:
		visit(v)
		if !v.IsNil() {
			leaves(v.Elem(), visit)
		}
	default:
		visit(v)
	}
}

// variants are records with every field set but one, for each field: a
// Decoder that decoded a full record before one of them must not let the
// missing field leak from the full one.
func variants(t *testing.T, seed uint64) []*flowrecord.Record {
	n := 0
	leaves(reflect.ValueOf(flowrecordtest.Random(t, rand.New(rand.NewPCG(seed, 0)))).Elem(), func(reflect.Value) { n++ })
	var out []*flowrecord.Record
	for i := range n {
		r := flowrecordtest.Random(t, rand.New(rand.NewPCG(seed, 0)))
		j := 0
		leaves(reflect.ValueOf(r).Elem(), func(v reflect.Value) {
			if j == i {
				v.SetZero()
			}
			j++
		})
		if r.Source.Address.IsValid() && r.Destination.Address.IsValid() {
			out = append(out, r)
		}
	}
	require.Greater(t, len(out), 90, "the record has fewer fields than expected")
	return out
}

// A Decoder reused over records that differ in which fields are set (the
// flowrecord.Aggregation and the labels among them) gives exactly what Decode gives.
func TestDecoderMatchesDecode(t *testing.T) {
	full := flowrecordtest.Random(t, rand.New(rand.NewPCG(7, 7)))
	aggregationOnly := flowrecordtest.EveryField()
	aggregationOnly.Aggregation = &flowrecord.Aggregation{Throughput: 5} // the counters are written even when zero
	inputs := []*flowrecord.Record{full, flowrecordtest.NodeHalf(), aggregationOnly, flowrecordtest.EveryField()}
	for _, v := range variants(t, 42) {
		inputs = append(inputs, full, v, flowrecordtest.NodeHalf(), v)
	}
	var d Decoder
	var r flowrecord.Record
	encoders := []func(*flowrecord.Record, plog.LogRecord){Encode, compactcodec.Encode}
	for i, in := range inputs {
		lr := plog.NewLogRecord()
		encoders[i/4%2](in, lr)
		var want flowrecord.Record
		require.NoError(t, Decode(lr, &want), "record %d", i)
		require.NoError(t, d.Decode(lr, &r), "record %d", i)
		require.Equal(t, want, r, "record %d", i)
	}
}

// An error leaves the Decoder ready for the next record, and it is the
// error Decode gives.
func TestDecoderAfterError(t *testing.T) {
	bad := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), bad)
	bad.Attributes().PutStr("flow.source_node.reverse.throughput", "fast") // after every other aggregation field
	var d Decoder
	var r flowrecord.Record
	for range 2 {
		lr := plog.NewLogRecord()
		Encode(flowrecordtest.EveryField(), lr)
		require.NoError(t, d.Decode(lr, &r))
		assert.Equal(t, flowrecordtest.EveryField(), &r)
		wantErr := Decode(bad, &flowrecord.Record{})
		require.Error(t, wantErr)
		assert.Equal(t, wantErr, d.Decode(bad, &r))
		lr = plog.NewLogRecord()
		Encode(flowrecordtest.NodeHalf(), lr)
		require.NoError(t, d.Decode(lr, &r))
		assert.Equal(t, flowrecordtest.NodeHalf(), &r)
	}
}

// A Decoder reuses the flowrecord.Aggregation of the record it decoded, across records
// without one.
func TestDecoderReusesAggregation(t *testing.T) {
	var d Decoder
	var r flowrecord.Record
	decode := func(in *flowrecord.Record) {
		lr := plog.NewLogRecord()
		Encode(in, lr)
		require.NoError(t, d.Decode(lr, &r))
		require.Equal(t, in, &r)
	}
	decode(flowrecordtest.EveryField())
	first := r.Aggregation
	decode(flowrecordtest.NodeHalf())
	decode(flowrecordtest.EveryField())
	assert.Same(t, first, r.Aggregation)
	lr := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), lr)
	assert.Zero(t, testing.AllocsPerRun(20, func() { _ = d.Decode(lr, &r) }), "a Decoder allocates for a full record")
}

// An addrCache parses as netip.ParseAddr, whatever texts share its slots.
func TestAddrCache(t *testing.T) {
	var c addrCache
	rng := rand.New(rand.NewPCG(5, 5))
	texts := []string{"", "x", "10.0.0.1.", "fd00::1%", "10.0.0.1", "fd00::1%eth0", "::ffff:10.0.0.1"}
	for range 4 * addrCacheSlots {
		texts = append(texts, flowrecordtest.RandomAddr(rng).String())
	}
	for range 3 {
		for _, s := range texts {
			for _, s := range []string{s, string([]byte(s))} { // the same text elsewhere
				want, err := netip.ParseAddr(s)
				got, ok := c.parse(s)
				assert.Equal(t, err == nil, ok, s)
				assert.Equal(t, want, got, s)
			}
		}
	}
}

// A record that came over the wire (no name or value string shared with the
// encoder) decodes as the one encoded in this process.
func TestDecodeWireRecord(t *testing.T) {
	for i, in := range append(variants(t, 9), flowrecordtest.EveryField(), flowrecordtest.NodeHalf()) {
		ld := plog.NewLogs()
		lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		Encode(in, lr)
		raw, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		require.NoError(t, err)
		wire, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(raw)
		require.NoError(t, err)
		var want, got flowrecord.Record
		require.NoError(t, Decode(lr, &want), "record %d", i)
		require.NoError(t, Decode(wire.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0), &got), "record %d", i)
		require.Equal(t, want, got, "record %d", i)
	}
}
