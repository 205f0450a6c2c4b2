package antreaflowsreceiver

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hand-built IPFIX (RFC 7011), for what no well-behaved exporter sends.
var be = binary.BigEndian

// smallTemplate is template 256: flowEndSeconds, source and destination
// IPv4 address and port, protocol, flowType and sourceNodeName (variable).
func smallTemplate() []byte {
	b := be.AppendUint16(nil, 256)
	b = be.AppendUint16(b, 8)
	for _, f := range [][2]uint16{{151, 4}, {8, 4}, {12, 4}, {7, 2}, {11, 2}, {4, 1}} {
		b = be.AppendUint16(be.AppendUint16(b, f[0]), f[1])
	}
	b = be.AppendUint32(be.AppendUint16(be.AppendUint16(b, 0x8000|137), 1), 56506)
	return be.AppendUint32(be.AppendUint16(be.AppendUint16(b, 0x8000|104), 0xffff), 56506)
}

// smallRecord is a record of smallTemplate: an inter-Node source half from node.
func smallRecord(port uint16, node string) []byte {
	b := be.AppendUint32(nil, uint32(t0.Unix()))
	b = append(b, 10, 10, 0, 5, 10, 10, 1, 7)
	b = be.AppendUint16(be.AppendUint16(b, port), 8080)
	b = append(b, 6, 2, byte(len(node)))
	return append(b, node...)
}

func set(id uint16, body ...[]byte) []byte {
	n := setHeaderLen
	for _, x := range body {
		n += len(x)
	}
	b := be.AppendUint16(be.AppendUint16(nil, id), uint16(n))
	for _, x := range body {
		b = append(b, x...)
	}
	return b
}

func message(sets ...[]byte) []byte {
	n := msgHeaderLen
	for _, s := range sets {
		n += len(s)
	}
	b := be.AppendUint16(nil, ipfixVersion)
	b = be.AppendUint16(b, uint16(n))
	b = be.AppendUint32(b, uint32(t0.Unix()))
	b = be.AppendUint32(b, 0)
	b = be.AppendUint32(b, fnv1("node-a")) // the observation domain of node-a's agent
	for _, s := range sets {
		b = append(b, s...)
	}
	return b
}

// TestIPFIXBadInputRefusedOneByOne: on one TCP session, a data set of an
// unknown template, a record that names no Node, a message whose sets do not
// fit it and a record cut short are each refused and counted by reason;
// every good record around them arrives. A header that is not IPFIX loses
// the stream's framing: it is counted and the connection closed.
func TestIPFIXBadInputRefusedOneByOne(t *testing.T) {
	s := startReceiver(t, nil)
	conn, err := net.Dial("tcp", s.cfg.IPFIX.Endpoint)
	require.NoError(t, err)
	defer conn.Close()
	write := func(b []byte) {
		_, err := conn.Write(b)
		require.NoError(t, err)
	}
	write(message(set(templateSetID, smallTemplate())))
	// Template 300 was never announced; the set of 256 beside it is read.
	write(message(set(300, smallRecord(1, "node-a")), set(256, smallRecord(2, "node-a"), smallRecord(3, ""), smallRecord(4, "node-a"))))
	// A set claiming more bytes than its message holds.
	bad := message(set(256, smallRecord(5, "node-a")))
	be.PutUint16(bad[msgHeaderLen+2:], 200)
	write(bad)
	// A record whose node name claims 200 bytes: the set's framing ends there.
	cut := smallRecord(7, "node-a")
	cut[len(cut)-len("node-a")-1] = 200
	write(message(set(256, smallRecord(6, "node-a"), cut)))
	write(message(set(256, smallRecord(8, "node-a"))))

	waitRecords(t, s.sink, 4)
	got, _ := records(t, s.sink.AllLogs())
	var ports []uint16
	for _, r := range got {
		ports = append(ports, r.Source.Port)
	}
	assert.Equal(t, []uint16{2, 4, 6, 8}, ports)
	for reason, n := range map[string]int64{reasonUnknownTemplate: 1, reasonNoNode: 1, reasonMalformedMessage: 1, reasonMalformedRecord: 1} {
		assert.Equal(t, n, s.counter(t, "otelcol_receiver_antrea_flows_refused", "reason", reason), reason)
	}

	// Not IPFIX: counted, and the connection is closed.
	notIPFIX := message(set(256, smallRecord(9, "node-a")))
	be.PutUint16(notIPFIX, 9)
	write(notIPFIX)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	assert.True(t, errors.Is(err, io.EOF), "the receiver closes the connection: %v", err)
	assert.Equal(t, int64(2), s.counter(t, "otelcol_receiver_antrea_flows_refused", "reason", reasonMalformedMessage))
	assert.Equal(t, 4, s.sink.LogRecordCount())
}

// TestUDPTemplatesExpire: a UDP exporter's template is forgotten after
// template_ttl without being sent again; its data sets are then refused as
// of an unknown template, until it announces the template again.
func TestUDPTemplatesExpire(t *testing.T) {
	s := startReceiver(t, func(c *Config) { c.IPFIX.TemplateTTL = 200 * time.Millisecond })
	conn, err := net.Dial("udp", s.cfg.IPFIX.Endpoint)
	require.NoError(t, err)
	defer conn.Close()
	send := func(b []byte) {
		_, err := conn.Write(b)
		require.NoError(t, err)
	}
	send(message(set(templateSetID, smallTemplate())))
	send(message(set(256, smallRecord(1, "node-a"))))
	waitRecords(t, s.sink, 1)
	time.Sleep(300 * time.Millisecond)
	send(message(set(256, smallRecord(2, "node-a"))))
	require.Eventually(t, func() bool {
		return s.counter(t, "otelcol_receiver_antrea_flows_refused", "reason", reasonUnknownTemplate) == 1
	}, 5*time.Second, 10*time.Millisecond)
	send(message(set(templateSetID, smallTemplate()), set(256, smallRecord(3, "node-a"))))
	waitRecords(t, s.sink, 2)
	got, _ := records(t, s.sink.AllLogs())
	assert.Equal(t, uint16(3), got[1].Source.Port)
}
