package antreaflowsreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
)

// slowSink is the fault injected: a next consumer that takes its time over
// each batch, as a loaded pipeline does.
func slowSink(sink *consumertest.LogsSink, d time.Duration) consumer.Logs {
	next, err := consumer.NewLogs(func(ctx context.Context, ld plog.Logs) error {
		time.Sleep(d)
		return sink.ConsumeLogs(ctx, ld)
	})
	if err != nil {
		panic(err)
	}
	return next
}

// waitStable waits until the sink has not grown for a while: the receiver's
// queue has drained.
func waitStable(t *testing.T, sink *consumertest.LogsSink) int {
	t.Helper()
	last, since := -1, time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n := sink.LogRecordCount()
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > 500*time.Millisecond {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the sink kept growing for 30s (%d records)", last)
	return 0
}

// TestUDPLossCounted (issue 42.6): an agent (go-ipfix's UDP exporting
// process, one record per message) sends far more than a slow pipeline can
// take. Every record sent is either delivered or counted: the datagrams the
// receiver sheds because its queue is full (queue_full), and the records
// the exporter's sequence numbers say never arrived (sequence_gap), whether
// the receiver shed them or the network or the socket lost them.
func TestUDPLossCounted(t *testing.T) {
	sink := new(consumertest.LogsSink)
	s := startReceiverTo(t, slowSink(sink, 2*time.Millisecond), func(c *Config) {
		c.IPFIX.Transports = []string{transportUDP}
		c.GRPC.Endpoint = ""
	})
	g := newAgent(t, s.cfg.IPFIX.Endpoint, "udp", "node-a", nil)

	const burst = 5000
	for i := range burst {
		src, _ := interNodeHalves(uint16(10000 + i))
		g.send(t, &src)
	}
	waitStable(t, sink)
	// The last records shed leave no gap until the agent's next message.
	marker, _ := interNodeHalves(9999)
	g.send(t, &marker)
	sent := burst + 1
	require.Eventually(t, func() bool {
		recs, _ := records(t, sink.AllLogs())
		return len(recs) > 0 && recs[len(recs)-1].Source.Port == 9999
	}, 10*time.Second, 10*time.Millisecond, "the marker is delivered")

	delivered := int64(sink.LogRecordCount())
	gap := s.counter(t, "otelcol_receiver_antrea_flows_records_dropped", "reason", "sequence_gap")
	shed := s.counter(t, "otelcol_receiver_antrea_flows_udp_datagrams_dropped", "reason", "queue_full")
	t.Logf("sent %d, delivered %d, sequence_gap %d, queue_full %d", sent, delivered, gap, shed)
	require.Less(t, delivered, int64(sent), "the pipeline was not slow enough to lose anything")
	assert.Equal(t, int64(sent), delivered+gap, "every record sent is delivered or counted")
	assert.Positive(t, shed, "the receiver's queue was full: it shed, and counted")
	assert.LessOrEqual(t, shed, gap, "the records of shed datagrams are in the gap")
	assert.Equal(t, delivered, s.counter(t, "otelcol_receiver_antrea_flows_records_emitted", "", ""))
}

// TestSequenceGaps: the records missing from an exporter's sequence, per
// observation domain, across the wrap at 2^32; a late message is not a gap,
// and a message whose records cannot all be framed is not followed.
func TestSequenceGaps(t *testing.T) {
	var q sequences
	h := func(domain, seq uint32) msgHeader { return msgHeader{domain: domain, sequence: seq} }
	assert.Equal(t, int64(0), q.next(h(1, 1<<32-3), 2, false), "the first message sets the sequence")
	assert.Equal(t, int64(0), q.next(h(1, 1<<32-1), 1, false))
	assert.Equal(t, int64(3), q.next(h(1, 3), 1, false), "across the wrap")
	assert.Equal(t, int64(0), q.next(h(2, 100), 1, false), "another domain has its own")
	assert.Equal(t, int64(0), q.next(h(1, 1), 1, false), "late")
	assert.Equal(t, int64(0), q.next(h(1, 4), 5, true), "unframed: not followed")
	assert.Equal(t, int64(0), q.next(h(1, 42), 1, false))
	assert.Equal(t, int64(1), q.next(h(1, 44), 1, false))
	assert.Equal(t, int64(1<<20-45), q.next(h(1, 1<<20), 1, false))
	assert.Equal(t, int64(0), q.next(h(1, 7), 1, false), "far behind: restarted, followed from its number")
	assert.Equal(t, int64(2), q.next(h(1, 10), 1, false))
}
