package ipfixexporter

import (
	"encoding/binary"
	"time"

	"github.com/vmware/go-ipfix/pkg/entities"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
)

// ipfixVersion is the IPFIX message header's version number.
const ipfixVersion = 10

// headerLen is the message header plus one set header: every data message
// holds exactly one data set.
const headerLen = entities.MsgHeaderLength + entities.SetHeaderLen

// templateMessageLen is the largest message carrying one template set.
func templateMessageLen(v4, v6 *layout.Template) int {
	return entities.MsgHeaderLength + max(v4.TemplateSetLen(), v6.TemplateSetLen())
}

// domain is the state of one Observation Domain on the current connection:
// templates are scoped to a domain, and so is the sequence number.
type domain struct {
	id uint32
	// seq is the number of data records sent in this domain on this connection.
	seq uint32
	// templatesSent is when the templates were last sent; zero: not yet.
	templatesSent time.Time
}

// message is an IPFIX message being filled with data records of one template
// in one observation domain, or a chunk of JSON lines. Messages are pooled:
// the encoder fills them, the writer sends them and, on a stream connection,
// keeps them until TCP acknowledges them.
type message struct {
	templateID uint16
	odid       uint32
	json       bool
	buf        []byte
	// positions are the batch positions of the records in buf, so that a failed
	// write hands exactly those records back to the sending queue.
	positions []int
}

func newMessage(size int) *message {
	return &message{buf: make([]byte, 0, size)}
}

// records is the number of flow records the message carries.
func (m *message) records() int { return len(m.positions) }

func (m *message) empty() bool { return len(m.positions) == 0 }

// reset empties m for data records of templateID in domain odid (IPFIX), or
// for JSON lines.
func (m *message) reset(templateID uint16, odid uint32, json bool) {
	m.templateID, m.odid, m.json = templateID, odid, json
	m.buf = m.buf[:0]
	if !json {
		m.buf = m.buf[:headerLen]
	}
	m.positions = m.positions[:0]
}

// finish writes the message and set headers.
func (m *message) finish(odid, seq uint32, now time.Time) []byte {
	putMessageHeader(m.buf, odid, seq, now)
	binary.BigEndian.PutUint16(m.buf[entities.MsgHeaderLength:], m.templateID)
	binary.BigEndian.PutUint16(m.buf[entities.MsgHeaderLength+2:], uint16(len(m.buf)-entities.MsgHeaderLength))
	return m.buf
}

func putMessageHeader(b []byte, odid, seq uint32, now time.Time) {
	binary.BigEndian.PutUint16(b[0:], ipfixVersion)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	binary.BigEndian.PutUint32(b[4:], uint32(now.Unix()))
	binary.BigEndian.PutUint32(b[8:], seq)
	binary.BigEndian.PutUint32(b[12:], odid)
}

// templateMessage builds the message announcing t in domain odid.
func templateMessage(t *layout.Template, odid, seq uint32, now time.Time) []byte {
	b := make([]byte, entities.MsgHeaderLength, entities.MsgHeaderLength+t.TemplateSetLen())
	b = t.AppendTemplateSet(b)
	putMessageHeader(b, odid, seq, now)
	return b
}

// inflight is a data message written to a stream connection that TCP has not
// yet seen acknowledged; it is kept to be resent if the connection dies.
type inflight struct {
	end uint64 // connection byte offset just after the message
	msg *message
}
