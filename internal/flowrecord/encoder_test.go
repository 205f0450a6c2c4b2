package flowrecord

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
)

// withoutSlabs runs f with the encoder on pdata's Set* path and the
// builder's own arrays.
func withoutSlabs(f func()) {
	s, i, p := strWrapperType, intWrapperType, pairsOffset
	strWrapperType, intWrapperType, pairsOffset = nil, nil, ^uintptr(0)
	defer func() { strWrapperType, intWrapperType, pairsOffset = s, i, p }()
	f()
}

// Records encoded one after the other share a slab of attribute arrays:
// what is done to one record's attributes afterwards (a pair appended,
// one removed, one changed) leaves the next record's alone.
func TestEncodeArraysStayApart(t *testing.T) {
	first, second := plog.NewLogRecord(), plog.NewLogRecord()
	Encode(nodeRecord(), first) // fewer attributes than a record may have: room left in its array
	Encode(fullRecord(), second)
	want := second.Attributes().AsRaw()
	for i := range 50 {
		first.Attributes().PutStr(fmt.Sprintf("added.%d", i), "x")
	}
	first.Attributes().Remove(AttrSourceAddress)
	v, _ := first.Attributes().Get(AttrProtocol)
	v.SetInt(17)
	require.Equal(t, want, second.Attributes().AsRaw())
	got, _ := first.Attributes().Get("added.49")
	require.Equal(t, "x", got.Str())
	third := plog.NewLogRecord()
	Encode(fullRecord(), third) // after the appends: takes the slab's next pairs
	require.Equal(t, want, third.Attributes().AsRaw())
	require.Equal(t, want, second.Attributes().AsRaw())
}

// Values written into slabs are the values SetStr/SetInt write, and stay
// independent: changing, removing or copying one leaves the others alone.
func TestEncodeSlabsEqualSetValues(t *testing.T) {
	for name, r := range map[string]*Record{"full": fullRecord(), "node": nodeRecord()} {
		t.Run(name, func(t *testing.T) {
			fast, slow := plog.NewLogRecord(), plog.NewLogRecord()
			Encode(r, fast)
			withoutSlabs(func() { Encode(r, slow) })
			require.Equal(t, slow.Attributes().AsRaw(), fast.Attributes().AsRaw())
			require.True(t, slow.Attributes().Equal(fast.Attributes()))

			copied := plog.NewLogRecord()
			fast.CopyTo(copied)
			want := copied.Attributes().AsRaw()
			v, _ := fast.Attributes().Get(AttrSourceAddress)
			v.SetStr("192.0.2.1")
			v, _ = fast.Attributes().Get(AttrProtocol)
			v.SetInt(17)
			fast.Attributes().Remove(AttrNetworkType)
			want[AttrSourceAddress], want[AttrProtocol] = "192.0.2.1", int64(17)
			delete(want, AttrNetworkType)
			require.Equal(t, want, fast.Attributes().AsRaw())
			require.Equal(t, slow.Attributes().AsRaw(), copied.Attributes().AsRaw())

			var back Record
			require.NoError(t, Decode(copied, &back))
		})
	}
}

// Attributes written from the fields' stores are the ones their enc writes,
// in the same order, with the same values: for arbitrary records (zero
// fields omitted, counters always written), counters above what an int
// attribute holds (saturated) and enum values without a name.
func TestEncodeFromStoresEqualsEnc(t *testing.T) {
	odd := fullRecord()
	odd.Stats.PacketTotal, odd.Aggregation.Throughput = math.MaxUint64, math.MaxInt64+1
	odd.EndReason, odd.Source.Kind = EndReason(200), EndpointKind(len(endpointKindNames))
	odd.Stats.OctetTotal, odd.Conntrack.Zone = 0, 0
	records := []*Record{fullRecord(), nodeRecord(), odd, {Protocol: 0,
		Source: Endpoint{Address: netip.MustParseAddr("::1")}, Destination: Endpoint{Address: netip.MustParseAddr("::2")}}}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		b := make([]byte, 700)
		for i := range b {
			b[i] = byte(rnd.UintN(256))
			if rnd.UintN(3) == 0 {
				b[i] = 0 // zero fields, omitted
			}
		}
		records = append(records, recordFrom(b))
	}
	for i, r := range records {
		fromStores, fromEnc := plog.NewLogRecord(), plog.NewLogRecord()
		Encode(r, fromStores)
		encodeFromStores = false
		Encode(r, fromEnc)
		encodeFromStores = true
		require.Equal(t, orderedAttrs(fromEnc), orderedAttrs(fromStores), "record %d", i)
	}
}

// orderedAttrs is lr's attributes as name=value in their order.
func orderedAttrs(lr plog.LogRecord) []string {
	var out []string
	for k, v := range lr.Attributes().All() {
		out = append(out, fmt.Sprintf("%s=%s:%s", k, v.Type(), v.AsString()))
	}
	return out
}

// A labels map's entries are carved from the same slab as the records'
// attributes: labels added to one record's map afterwards land in an array
// of their own, and records encoded after it are unchanged.
func TestEncodeLabelsStayApart(t *testing.T) {
	first, second := plog.NewLogRecord(), plog.NewLogRecord()
	Encode(fullRecord(), first)
	Encode(fullRecord(), second)
	want := second.Attributes().AsRaw()
	v, _ := first.Attributes().Get("source.k8s.pod.labels")
	for i := range 20 {
		v.Map().PutStr(fmt.Sprintf("added.%d", i), "x")
	}
	v.Map().Remove("app")
	require.Equal(t, want, second.Attributes().AsRaw())
	require.Equal(t, 21, v.Map().Len())
	third := plog.NewLogRecord()
	Encode(fullRecord(), third)
	require.Equal(t, want, third.Attributes().AsRaw())
	var back Record
	require.NoError(t, Decode(first, &back))
	require.Len(t, back.Source.PodLabels, 21)
}
