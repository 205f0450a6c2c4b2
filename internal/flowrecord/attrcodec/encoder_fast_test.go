//go:build !flowtel_safe

package attrcodec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
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
	Encode(flowrecordtest.NodeHalf(), first) // fewer attributes than a record may have: room left in its array
	Encode(flowrecordtest.EveryField(), second)
	want := second.Attributes().AsRaw()
	for i := range 50 {
		first.Attributes().PutStr(fmt.Sprintf("added.%d", i), "x")
	}
	first.Attributes().Remove(catalogue.AttrSourceAddress)
	v, _ := first.Attributes().Get(catalogue.AttrProtocol)
	v.SetInt(17)
	require.Equal(t, want, second.Attributes().AsRaw())
	got, _ := first.Attributes().Get("added.49")
	require.Equal(t, "x", got.Str())
	third := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), third) // after the appends: takes the slab's next pairs
	require.Equal(t, want, third.Attributes().AsRaw())
	require.Equal(t, want, second.Attributes().AsRaw())
}

// Values written into slabs are the values SetStr/SetInt write, and stay
// independent: changing, removing or copying one leaves the others alone.
func TestEncodeSlabsEqualSetValues(t *testing.T) {
	for name, r := range map[string]*flowrecord.Record{"full": flowrecordtest.EveryField(), "node": flowrecordtest.NodeHalf()} {
		t.Run(name, func(t *testing.T) {
			fast, slow := plog.NewLogRecord(), plog.NewLogRecord()
			Encode(r, fast)
			withoutSlabs(func() { Encode(r, slow) })
			require.Equal(t, slow.Attributes().AsRaw(), fast.Attributes().AsRaw())
			require.True(t, slow.Attributes().Equal(fast.Attributes()))

			copied := plog.NewLogRecord()
			fast.CopyTo(copied)
			want := copied.Attributes().AsRaw()
			v, _ := fast.Attributes().Get(catalogue.AttrSourceAddress)
			v.SetStr("192.0.2.1")
			v, _ = fast.Attributes().Get(catalogue.AttrProtocol)
			v.SetInt(17)
			fast.Attributes().Remove(catalogue.AttrNetworkType)
			want[catalogue.AttrSourceAddress], want[catalogue.AttrProtocol] = "192.0.2.1", int64(17)
			delete(want, catalogue.AttrNetworkType)
			require.Equal(t, want, fast.Attributes().AsRaw())
			require.Equal(t, slow.Attributes().AsRaw(), copied.Attributes().AsRaw())

			var back flowrecord.Record
			require.NoError(t, Decode(copied, &back))
		})
	}
}

// Attributes written straight into the record's array are the ones the
// builder appends, in the same order, with the same values: for arbitrary
// records (zero fields omitted, counters always written), counters above
// what an int attribute holds (saturated) and enum values without a name.
func TestEncodeDirectPairsEqualBuilder(t *testing.T) {
	odd := flowrecordtest.EveryField()
	odd.Stats.PacketTotal, odd.Aggregation.Throughput = math.MaxUint64, math.MaxInt64+1
	odd.EndReason, odd.Source.Kind = flowrecord.EndReason(200), flowrecord.EndpointKind(len(flowrecord.EndpointKind(0).Names()))
	odd.Stats.OctetTotal, odd.Conntrack.Zone = 0, 0
	records := []*flowrecord.Record{flowrecordtest.EveryField(), flowrecordtest.NodeHalf(), odd, {Protocol: 0,
		Source: flowrecord.Endpoint{Address: netip.MustParseAddr("::1")}, Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("::2")}}}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		b := make([]byte, 700)
		for i := range b {
			b[i] = byte(rnd.UintN(256))
			if rnd.UintN(3) == 0 {
				b[i] = 0 // zero fields, omitted
			}
		}
		records = append(records, flowrecordtest.FromBytes(b))
	}
	for i, r := range records {
		direct, built := plog.NewLogRecord(), plog.NewLogRecord()
		Encode(r, direct)
		writePairs = false
		Encode(r, built)
		writePairs = true
		require.Equal(t, orderedAttrs(built), orderedAttrs(direct), "record %d", i)
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
	Encode(flowrecordtest.EveryField(), first)
	Encode(flowrecordtest.EveryField(), second)
	want := second.Attributes().AsRaw()
	v, _ := first.Attributes().Get("source.k8s.pod.labels")
	for i := range 20 {
		v.Map().PutStr(fmt.Sprintf("added.%d", i), "x")
	}
	v.Map().Remove("app")
	require.Equal(t, want, second.Attributes().AsRaw())
	require.Equal(t, 21, v.Map().Len())
	third := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), third)
	require.Equal(t, want, third.Attributes().AsRaw())
	var back flowrecord.Record
	require.NoError(t, Decode(first, &back))
	require.Len(t, back.Source.PodLabels, 21)
}
