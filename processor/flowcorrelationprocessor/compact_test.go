package flowcorrelationprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
)

// attributeForm fails unless every record of the batches is in the public
// attribute form: what the gateway hands to a user's pipeline.
func attributeForm(t *testing.T, batches []plog.Logs) {
	t.Helper()
	for _, ld := range batches {
		lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		for i := range lrs.Len() {
			assert.Equal(t, pcommon.ValueTypeEmpty, lrs.At(i).Body().Type())
			_, ok := lrs.At(i).Attributes().Get(compactcodec.AttrRecordEncoding)
			assert.False(t, ok)
			_, ok = lrs.At(i).Attributes().Get(catalogue.AttrSourceAddress)
			assert.True(t, ok)
		}
	}
}

// Compact node records pair with each other and with attribute-form ones (a
// rollout: gateways upgraded, node collectors one by one), and what comes out
// is the same attribute-form record either way; a compact record that does
// not decode is dropped alone, counted.
func TestAggregateReadsCompactRecords(t *testing.T) {
	run := func(src, dst func(*flowrecord.Record, plog.LogRecord)) []plog.Logs {
		sink := &consumertest.LogsSink{}
		h := newHarness(t, aggregateConfig(), sink)
		s, d := interNode(1, t0.Add(5*time.Second), 1000, 1010)
		in := encodedLogs(src, s)
		broken := in.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
		compactcodec.Encode(s, broken)
		broken.Body().SetEmptyBytes().FromRaw([]byte{1, 2, 3})
		require.NoError(t, h.p.ConsumeLogs(ctx, in))
		require.NoError(t, h.p.ConsumeLogs(ctx, encodedLogs(dst, d)))
		assert.EqualValues(t, 1, h.sum(t, "pairs"))
		assert.EqualValues(t, 1, h.sum(t, "records_dropped", reason("decode_error")))
		return sink.AllLogs()
	}
	want := decodeAllLogs(t, run(attrcodec.Encode, attrcodec.Encode))
	require.Len(t, want, 1)
	assert.Equal(t, flowrecord.CorrelationPaired, want[0].Correlation)
	for name, out := range map[string][]plog.Logs{
		"both compact":             run(compactcodec.Encode, compactcodec.Encode),
		"compact source half":      run(compactcodec.Encode, attrcodec.Encode),
		"compact destination half": run(attrcodec.Encode, compactcodec.Encode),
	} {
		attributeForm(t, out)
		assert.Equal(t, want, decodeAllLogs(t, out), name)
	}
}

// Proxy mode rewrites a compact record in place into the attribute form.
func TestProxyModeReadsCompactRecords(t *testing.T) {
	cfg := aggregateConfig()
	cfg.Mode = ModeProxy
	sink := &consumertest.LogsSink{}
	h := newHarness(t, cfg, sink)
	src, dst := interNode(1, t0.Add(time.Second), 1000, 1020)
	require.NoError(t, h.p.ConsumeLogs(ctx, encodedLogs(compactcodec.Encode, src, dst)))
	attributeForm(t, sink.AllLogs())
	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 2)
	assert.Equal(t, flowrecord.DirectionEgress, got[0].Direction)
	assert.Equal(t, "server", got[1].Destination.PodName)
}
