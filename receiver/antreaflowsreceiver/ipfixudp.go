package antreaflowsreceiver

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"go.uber.org/zap"
)

// datagram is one IPFIX message read from the UDP socket.
type datagram struct {
	msg  []byte
	from netip.AddrPort
}

// serveUDP reads IPFIX datagrams, one message each, and queues them for
// processUDP: the socket is read however slow the pipeline is, so a datagram
// the pipeline has no room for is shed here, and counted (queue_full),
// rather than lost uncounted in the socket's buffer.
func (r *antreaReceiver) serveUDP(pc net.PacketConn) {
	defer r.wg.Done()
	ctx := context.Background()
	q := make(chan datagram, r.cfg.IPFIX.UDPQueueSize)
	r.wg.Add(1)
	go r.processUDP(q)
	defer close(q)
	uc, _ := pc.(*net.UDPConn)
	buf := make([]byte, 65535)
	for {
		var (
			n    int
			from netip.AddrPort
			err  error
		)
		if uc != nil {
			n, from, err = uc.ReadFromUDPAddrPort(buf)
		} else {
			var a net.Addr
			n, a, err = pc.ReadFrom(buf)
			if ua, ok := a.(*net.UDPAddr); ok {
				from = ua.AddrPort()
			}
		}
		if err != nil {
			select {
			case <-r.stop:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		d := datagram{msg: append([]byte(nil), buf[:n]...), from: from}
		select {
		case q <- d:
		default:
			r.tel.ReceiverAntreaFlowsUDPDatagramsDropped.Add(ctx, 1, dropQueueFull)
			r.set.Logger.Debug("antrea_flows: ipfix udp queue full; datagram shed", zap.Stringer("exporter", from), zap.Int("queue_size", cap(q)))
		}
	}
}

// processUDP decodes the queued datagrams and hands their records on.
// Templates are kept per exporter address and expire after template_ttl
// without being sent again; at most max_udp_exporters exporters are
// remembered (udpSessions).
func (r *antreaReceiver) processUDP(q <-chan datagram) {
	defer r.wg.Done()
	ctx := context.Background()
	c := &r.cfg.IPFIX
	sessions := newUDPSessions(c.MaxUDPExporters, c.UDPExporterIdle, func() *session {
		return newBoundedSession(c.TemplateTTL, r.templates)
	})
	defer sessions.closeAll()
	for d := range q {
		s, ok := sessions.get(d.from, time.Now())
		if !ok {
			r.refused(ctx, reasonExporterLimit, 1, fmt.Errorf("ipfix udp exporter %s: %d exporters remembered (ipfix.max_udp_exporters), none idle for ipfix.udp_exporter_idle (%s)",
				d.from, c.MaxUDPExporters, c.UDPExporterIdle))
			continue
		}
		r.handleDatagram(ctx, s, d)
	}
}

// handleDatagram is handleMessage with the exporter's sequence numbers
// checked: the records they say were sent and never arrived are counted
// (sequence_gap).
func (r *antreaReceiver) handleDatagram(ctx context.Context, s *session, d datagram) {
	from := net.UDPAddrFromAddrPort(d.from)
	res, err := s.decode(d.msg, time.Now())
	if err != nil {
		if h, herr := readHeader(d.msg); herr == nil {
			s.seq.forget(h.domain) // its records cannot be counted
		}
		r.refused(ctx, reasonMalformedMessage, 1, err)
		r.set.Logger.Warn("antrea_flows: IPFIX message refused", zap.Stringer("exporter", from), zap.Error(err))
		return
	}
	if lost := s.seq.next(res.header, res.framed, res.unframed); lost > 0 {
		r.tel.ReceiverAntreaFlowsRecordsDropped.Add(ctx, lost, dropSequenceGap)
		r.set.Logger.Debug("antrea_flows: IPFIX records missing from the exporter's sequence", zap.Stringer("exporter", from),
			zap.Uint32("observation_domain", res.header.domain), zap.Int64("records", lost))
	}
	b := r.newBatch()
	r.handleResult(ctx, res, b, viaUDP, from)
	r.handOn(ctx, b, viaUDP, false)
}

// udpSessions are the UDP exporters' sessions by source address, most
// recently heard first. Finding a session, remembering a new one and
// forgetting the least recently heard are O(1). A new exporter when max are
// remembered takes the place of the least recently heard only if that one
// has been idle for idle: a flood of new (spoofable) sources cannot make the
// receiver forget an exporter that is sending; they are refused instead.
type udpSessions struct {
	byAddr map[netip.AddrPort]*list.Element // of *udpSession
	lru    list.List                        // front: most recently heard
	max    int
	idle   time.Duration
	create func() *session
}

type udpSession struct {
	addr  netip.AddrPort
	s     *session
	heard time.Time
}

func newUDPSessions(maxSessions int, idle time.Duration, create func() *session) *udpSessions {
	return &udpSessions{byAddr: make(map[netip.AddrPort]*list.Element), max: maxSessions, idle: idle, create: create}
}

// get returns the session of the exporter at addr, heard at now; false when
// it is new and no remembered one can make room for it.
func (u *udpSessions) get(addr netip.AddrPort, now time.Time) (*session, bool) {
	if e := u.byAddr[addr]; e != nil {
		us := e.Value.(*udpSession)
		us.heard = now
		u.lru.MoveToFront(e)
		return us.s, true
	}
	if len(u.byAddr) >= u.max {
		e := u.lru.Back()
		oldest := e.Value.(*udpSession)
		if now.Sub(oldest.heard) < u.idle {
			return nil, false
		}
		oldest.s.close()
		delete(u.byAddr, oldest.addr)
		u.lru.Remove(e)
	}
	us := &udpSession{addr: addr, s: u.create(), heard: now}
	u.byAddr[addr] = u.lru.PushFront(us)
	return us.s, true
}

func (u *udpSessions) len() int { return len(u.byAddr) }

func (u *udpSessions) closeAll() {
	for e := u.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*udpSession).s.close()
	}
	clear(u.byAddr)
	u.lru.Init()
}

// maxSequenceDomains bounds the observation domains whose sequence one UDP
// exporter's session follows (an agent uses one).
const maxSequenceDomains = 16

// reorderWindow: a message whose sequence number is behind the one expected
// by less than this is a late (reordered) message; by more, the exporter
// started counting again (it restarted), and the sequence is followed from it.
const reorderWindow = 1 << 16

// sequences follows an exporter's sequence numbers, per observation domain:
// the number a message carries is the data records the exporter sent in the
// domain before it, modulo 2^32 (RFC 7011 §3.1).
type sequences struct {
	expected map[uint32]uint32
}

// next returns the records the exporter sent before the message h heads
// that were not seen (0 for the first message of a domain), and expects the
// next message after this one's framed records. A message some of whose
// records could not be framed leaves the domain unfollowed until its next
// message.
func (q *sequences) next(h msgHeader, framed int, unframed bool) int64 {
	if q.expected == nil {
		q.expected = make(map[uint32]uint32, 1)
	}
	var lost int64
	want, ok := q.expected[h.domain]
	if ok {
		gap := int32(h.sequence - want)
		switch {
		case gap > 0:
			lost = int64(gap)
		case gap < 0 && gap > -reorderWindow:
			// Late: its records were counted missing when the message
			// after it arrived; the sequence expected stays.
			return 0
		}
	}
	if unframed {
		delete(q.expected, h.domain)
		return lost
	}
	if !ok && len(q.expected) >= maxSequenceDomains {
		return lost
	}
	q.expected[h.domain] = h.sequence + uint32(framed)
	return lost
}

func (q *sequences) forget(domain uint32) { delete(q.expected, domain) }
