package antreaflowsreceiver

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUDPFloodKeepsActiveExporters (issue 42.8): with max_udp_exporters
// exporters remembered, a flood of new (spoofable) UDP sources does not
// make the receiver forget an agent that is sending: the new sources are
// refused and counted (exporter_limit) while every remembered exporter is
// active, and the agent's next record still finds its template.
func TestUDPFloodKeepsActiveExporters(t *testing.T) {
	s := startReceiver(t, func(c *Config) {
		c.IPFIX.Transports = []string{transportUDP}
		c.IPFIX.MaxUDPExporters = 3
	})
	g := newAgent(t, s.cfg.IPFIX.Endpoint, "udp", "node-a", nil)
	first, _ := interNodeHalves(1000)
	g.send(t, &first)
	waitRecords(t, s.sink, 1)

	const flood = 20
	for range flood {
		c, err := net.Dial("udp", s.cfg.IPFIX.Endpoint)
		require.NoError(t, err)
		_, err = c.Write(message(set(templateSetID, smallTemplate())))
		require.NoError(t, err)
		c.Close()
	}
	require.Eventually(t, func() bool {
		return s.counter(t, "otelcol_receiver_antrea_flows_refused", "reason", reasonExporterLimit) == flood-2
	}, 5*time.Second, 10*time.Millisecond, "two sources fill the table, the others are refused: %d",
		s.counter(t, "otelcol_receiver_antrea_flows_refused", "reason", reasonExporterLimit))

	next, _ := interNodeHalves(1001)
	g.send(t, &next)
	waitRecords(t, s.sink, 2)
	assert.Zero(t, s.counter(t, "otelcol_receiver_antrea_flows_refused", "reason", reasonUnknownTemplate))
}

// TestUDPSessionsLRU: the least recently heard exporter is forgotten first,
// and only once it has been idle for udp_exporter_idle; lookups touch no
// other session.
func TestUDPSessionsLRU(t *testing.T) {
	u := newUDPSessions(2, time.Minute, func() *session { return newSession(0) })
	a, b, c := netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:1"), netip.MustParseAddrPort("10.0.0.3:1")
	sa, ok := u.get(a, t0)
	require.True(t, ok)
	_, ok = u.get(b, t0.Add(time.Second))
	require.True(t, ok)
	again, ok := u.get(a, t0.Add(2*time.Second))
	require.True(t, ok)
	require.Same(t, sa, again)
	_, ok = u.get(c, t0.Add(30*time.Second))
	assert.False(t, ok, "both remembered exporters are active: the new one is refused")
	_, ok = u.get(c, t0.Add(2*time.Minute))
	require.True(t, ok, "b, idle for over a minute and least recently heard, is forgotten")
	assert.Equal(t, 2, u.len())
	again, ok = u.get(a, t0.Add(2*time.Minute))
	require.True(t, ok)
	assert.Same(t, sa, again, "a, heard after b, is kept")
}
