package antreaflowsreceiver

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withHandOff sets the hand-off limits of the receivers the test starts.
func withHandOff(t *testing.T, records int, delay time.Duration) {
	old := handOffLimits
	handOffLimits.records, handOffLimits.delay = records, delay
	t.Cleanup(func() { handOffLimits = old })
}

// oneRecordMessages is the template message, then n messages of one record
// each, as an agent sends them.
func oneRecordMessages(n int) []byte {
	b := message(set(templateSetID, smallTemplate()))
	for i := range n {
		b = append(b, message(set(256, smallRecord(uint16(i), "node-a")))...)
	}
	return b
}

// TestIPFIXHandOffGathersMessages: 2 500 messages of one record each on one
// connection reach the next consumer in three hand-offs (the records bound,
// 1 000, twice, and the rest when the agent closes the connection), every
// record once and in order.
func TestIPFIXHandOffGathersMessages(t *testing.T) {
	withHandOff(t, 1000, time.Hour)
	s := startReceiver(t, nil)
	conn, err := net.Dial("tcp", s.cfg.IPFIX.Endpoint)
	require.NoError(t, err)
	_, err = conn.Write(oneRecordMessages(2500))
	require.NoError(t, err)
	require.NoError(t, conn.Close())

	waitRecords(t, s.sink, 2500)
	var sizes []int
	for _, l := range s.sink.AllLogs() {
		sizes = append(sizes, l.LogRecordCount())
	}
	assert.Equal(t, []int{1000, 1000, 500}, sizes)
	got, _ := records(t, s.sink.AllLogs())
	for i, r := range got {
		require.Equal(t, uint16(i), r.Source.Port, "record %d", i)
	}
	assert.Equal(t, int64(2500), s.counter(t, "otelcol_receiver_antrea_flows_records_emitted", "", ""))
}

// TestIPFIXHandOffDue: records that wait for more are handed on at the
// latest the delay after the first arrived, the connection still open and
// silent; the connection then goes on being read (over TLS too, whose
// reads time out while records wait).
func TestIPFIXHandOffDue(t *testing.T) {
	withHandOff(t, 1000, 50*time.Millisecond)
	p := newPKI(t)
	s := startReceiver(t, p.secure)
	conn, err := tls.Dial("tcp", s.cfg.IPFIX.Endpoint, clientTLS(t, p, p.clientCert, p.clientKey))
	require.NoError(t, err)
	defer conn.Close()
	msgs := oneRecordMessages(6)
	split := len(message(set(templateSetID, smallTemplate()))) + 3*len(message(set(256, smallRecord(0, "node-a"))))
	for _, part := range [][]byte{msgs[:split], msgs[split:]} {
		start := time.Now()
		_, err = conn.Write(part)
		require.NoError(t, err)
		waitRecords(t, s.sink, s.sink.LogRecordCount()+3)
		assert.Less(t, time.Since(start), 5*time.Second)
	}
	got, _ := records(t, s.sink.AllLogs())
	require.Len(t, got, 6)
	for i, r := range got {
		assert.Equal(t, uint16(i), r.Source.Port)
	}
	assert.Equal(t, int64(6), s.counter(t, "otelcol_receiver_antrea_flows_records_emitted", "", ""))
}

// TestIPFIXHandOffAtShutdown: records still waiting for their hand-off when
// the receiver shuts down are handed on before Shutdown returns: none is
// lost.
func TestIPFIXHandOffAtShutdown(t *testing.T) {
	withHandOff(t, 1000, time.Hour)
	s := startReceiver(t, nil)
	conn, err := net.Dial("tcp", s.cfg.IPFIX.Endpoint)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write(oneRecordMessages(10))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return s.counter(t, "otelcol_receiver_antrea_flows_records_received", "transport", "tcp") == 10
	}, 10*time.Second, 10*time.Millisecond, "the receiver read the 10 records")
	assert.Zero(t, s.sink.LogRecordCount(), "waiting for more")

	require.NoError(t, s.r.Shutdown(context.Background()))
	assert.Equal(t, 10, s.sink.LogRecordCount())
	assert.Len(t, s.sink.AllLogs(), 1)
	assert.Equal(t, int64(10), s.counter(t, "otelcol_receiver_antrea_flows_records_emitted", "", ""))
}
