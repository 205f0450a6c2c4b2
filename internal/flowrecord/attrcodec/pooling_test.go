package attrcodec

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/featuregate"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// TestEncodeUnderProtoPooling: with pdata's pdata.useProtoPooling gate on,
// pdata hands the wrappers of deleted values back to its pools and gives
// them to the next values it makes. The encoder's wrappers come from its
// slabs (encoder_fast.go): records removed from a batch put slab slots into
// pdata's pools, values made after that through pdata's API take them, and
// the records still in the batch, and those encoded after, must read back
// unchanged. Run in both builds (the slab path, and the public API alone
// with flowtel_safe).
func TestEncodeUnderProtoPooling(t *testing.T) {
	const gate = "pdata.useProtoPooling"
	require.NoError(t, featuregate.GlobalRegistry().Set(gate, true))
	t.Cleanup(func() { require.NoError(t, featuregate.GlobalRegistry().Set(gate, false)) })

	record := func(i int) *flowrecord.Record {
		r := flowrecordtest.EveryField()
		r.Source.Port = uint16(10000 + i)
		r.Source.PodName = fmt.Sprintf("web-%d", i)
		r.Destination.Namespace = fmt.Sprintf("ns-%d", i)
		r.Source.PodLabels = map[string]string{"app": fmt.Sprintf("web-%d", i)}
		r.Stats.OctetTotal = uint64(1000 + i)
		return r
	}
	const n = 200
	logs := plog.NewLogs()
	lrs := logs.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := range n {
		Encode(record(i), lrs.AppendEmpty())
	}
	// Odd records go: under the gate pdata pools every value wrapper of theirs.
	i := 0
	lrs.RemoveIf(func(plog.LogRecord) bool { i++; return i%2 == 0 })
	require.Equal(t, n/2, lrs.Len())
	// pdata's API takes the pooled wrappers and writes into them.
	scratch := plog.NewLogs().ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for j := range 4 * n {
		a := scratch.AppendEmpty().Attributes()
		a.PutStr("overwrite", fmt.Sprintf("x-%d", j))
		a.PutInt("n", int64(-j))
	}
	// More records encoded after: the encoder goes on from its slabs.
	more := plog.NewLogs().ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for j := range n {
		Encode(record(n+j), more.AppendEmpty())
	}
	var got flowrecord.Record
	for k := range lrs.Len() {
		require.NoError(t, Decode(lrs.At(k), &got))
		require.Equal(t, record(2*k), &got, "record %d after pdata reused the pooled wrappers", 2*k)
	}
	for j := range more.Len() {
		require.NoError(t, Decode(more.At(j), &got))
		require.Equal(t, record(n+j), &got, "record %d encoded after", n+j)
	}
}
