package flowcorrelationprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// In proxy mode a relay leg (a copy of its Node's destination half that
// exists only for pairing) is not passed on, and is counted.
func TestProxyModeFoldsRelayLegs(t *testing.T) {
	cfg := aggregateConfig()
	cfg.Mode = ModeProxy
	sink := &consumertest.LogsSink{}
	h := newHarness(t, cfg, sink)
	_, dst := interNode(1, t0.Add(time.Second), 1000, 1020)
	relay := *dst
	relay.Reporter.Side = flowrecord.SideRelay
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(dst, &relay)))
	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 1)
	assert.Equal(t, flowrecord.SideDestination, got[0].Reporter.Side)
	assert.EqualValues(t, 1, h.sum(t, "records_relay_folded", reason("proxy")))
}
