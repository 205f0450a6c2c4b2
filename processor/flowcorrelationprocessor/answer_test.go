package flowcorrelationprocessor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// gate is a next consumer that holds every batch until opened, as an
// exporter whose full queue blocks (block_on_overflow) does.
type gate struct {
	consumertest.LogsSink
	open    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	waiting int
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	g.mu.Lock()
	g.waiting++
	g.mu.Unlock()
	<-g.open
	return g.LogsSink.ConsumeLogs(ctx, ld)
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// TestAFoldedBatchIsAnsweredBeforeTheSendersDeadline: a batch folded in is
// answered while its sender waits, however long the exports behind take.
// Before, the answer waited for the sink: the node collector gave up after
// its 5 s and sent the batch again, to the next gateway process when this
// one was being replaced, which counted it a second time (a rollout in the
// real cluster repeated a delta of three downloads).
func TestAFoldedBatchIsAnsweredBeforeTheSendersDeadline(t *testing.T) {
	next := newGate()
	h := newHarness(t, aggregateConfig(), next)
	t.Cleanup(next.release) // before the harness's Shutdown, which waits for the send
	src, dst := interNode(1, t0.Add(time.Second), 1000, 1020)

	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	deadline, _ := dctx.Deadline()
	time.AfterFunc(3*time.Second, next.release) // so that a late answer fails the test rather than hangs it
	err := h.p.ConsumeLogs(dctx, logsOf(src, dst))
	answered := time.Now()
	require.NoError(t, err, "the batch is folded in")
	assert.True(t, answered.Before(deadline), "answered %v after the sender's deadline", answered.Sub(deadline))
	assert.EqualValues(t, 2, h.sum(t, "records_received"))
	assert.EqualValues(t, 1, h.sum(t, "pairs"))
	assert.Equal(t, 1, next.held(), "the pair waits at the sink")

	next.release()
	require.Eventually(t, func() bool { return next.LogRecordCount() == 1 }, 5*time.Second, 10*time.Millisecond)
	got := decodeAllLogs(t, next.AllLogs())
	require.Len(t, got, 1)
	assert.Equal(t, flowrecord.CorrelationPaired, got[0].Correlation)
	require.Eventually(t, func() bool { return h.sum(t, "records_emitted", state("paired")) == 1 }, 5*time.Second, 10*time.Millisecond)
}

// TestABatchThatCannotBeFoldedInTimeIsRefusedWhole: when every background
// send waits at the sink, a new batch waits for one until its sender's
// deadline (less the answer's margin), and is then refused with nothing of
// it counted; sent again, it is counted once.
func TestABatchThatCannotBeFoldedInTimeIsRefusedWhole(t *testing.T) {
	next := newGate()
	h := newHarness(t, aggregateConfig(), next)
	t.Cleanup(next.release)
	time.AfterFunc(10*time.Second, next.release) // so that a late answer fails the test rather than hangs it

	for i := range sendsInFlight {
		src, dst := interNode(i, t0.Add(time.Second), 1000, 1020)
		dctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		require.NoError(t, h.p.ConsumeLogs(dctx, logsOf(src, dst)))
		cancel()
	}
	require.Eventually(t, func() bool { return next.held() == sendsInFlight }, 5*time.Second, 10*time.Millisecond)
	held := h.sum(t, "connections_held")

	src, dst := interNode(100, t0.Add(time.Second), 1000, 1020)
	dctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	deadline, _ := dctx.Deadline()
	err := h.p.ConsumeLogs(dctx, logsOf(src, dst))
	require.ErrorIs(t, err, errRefusedAtDeadline)
	assert.True(t, time.Now().Before(deadline), "refused before the sender's deadline")
	assert.EqualValues(t, 2, h.sum(t, "records_refused"))
	assert.EqualValues(t, 2*sendsInFlight, h.sum(t, "records_received"), "a refused batch is not counted as received")
	assert.Equal(t, held, h.sum(t, "connections_held"), "nothing of the refused batch is held")

	next.release()
	require.NoError(t, h.p.ConsumeLogs(context.Background(), logsOf(src, dst)), "sent again")
	require.Eventually(t, func() bool { return next.LogRecordCount() == sendsInFlight+1 }, 5*time.Second, 10*time.Millisecond)
	byKey := map[string]int{}
	for _, r := range decodeAllLogs(t, next.AllLogs()) {
		byKey[r.Key]++
		assert.Equal(t, flowrecord.CorrelationPaired, r.Correlation)
	}
	assert.Len(t, byKey, sendsInFlight+1)
	assert.Equal(t, 1, byKey[src.Key], "the refused connection once")
	assert.EqualValues(t, 2*sendsInFlight+2, h.sum(t, "records_received"))
}

// TestShutdownWaitsForTheBackgroundSends: what was answered and is still
// on its way to the sink arrives before Shutdown returns.
func TestShutdownWaitsForTheBackgroundSends(t *testing.T) {
	next := newGate()
	h := newHarness(t, aggregateConfig(), next)
	p := h.p
	src, dst := interNode(1, t0.Add(time.Second), 1000, 1020)
	dctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	time.AfterFunc(400*time.Millisecond, next.release) // after the answer (at 150 ms)
	require.NoError(t, p.ConsumeLogs(dctx, logsOf(src, dst)))
	require.Zero(t, next.LogRecordCount())

	require.NoError(t, p.Shutdown(context.Background()))
	assert.Equal(t, 1, next.LogRecordCount(), "the pair reached the sink before Shutdown returned")
}
