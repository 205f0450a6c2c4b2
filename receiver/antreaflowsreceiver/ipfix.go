package antreaflowsreceiver

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"go.uber.org/zap"
)

func (r *antreaReceiver) startIPFIX() error {
	c := &r.cfg.IPFIX
	if c.Endpoint == "" {
		return nil
	}
	if slices.Contains(c.Transports, transportTCP) {
		ln, err := net.Listen("tcp", c.Endpoint)
		if err != nil {
			return fmt.Errorf("antrea_flows: ipfix tcp listener on %s: %w", c.Endpoint, err)
		}
		r.tcp = ln
		r.wg.Add(1)
		go r.acceptIPFIX(ln)
	}
	if slices.Contains(c.Transports, transportUDP) {
		pc, err := net.ListenPacket("udp", c.Endpoint)
		if err != nil {
			return fmt.Errorf("antrea_flows: ipfix udp listener on %s: %w", c.Endpoint, err)
		}
		r.udp = pc
		r.wg.Add(1)
		go r.serveUDP(pc)
	}
	return nil
}

func (r *antreaReceiver) acceptIPFIX(ln net.Listener) {
	defer r.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			select {
			case <-r.stop:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			r.set.Logger.Warn("antrea_flows: ipfix accept failed", zap.Error(err))
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !r.track(conn) {
			conn.Close()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(conn)
			defer conn.Close()
			r.serveIPFIXConn(conn)
		}()
	}
}

// handOffLimits bound how the records of a TCP or TLS session's consecutive
// messages, or of a gRPC stream's consecutive requests, gather into one
// hand-off to the next consumer (an agent sends one record per message, one
// flow per request): at most records of them, handed on at the latest delay
// after the first arrived, and at once when the session or stream ends. A
// package variable so that tests can change it before a receiver is made.
var handOffLimits = struct {
	records int
	delay   time.Duration
}{records: 1000, delay: 20 * time.Millisecond}

// serveIPFIXConn reads one exporter's IPFIX stream (TCP, or TLS after the
// handshake) until it ends. The message header frames the stream: a header
// that is not IPFIX's loses the framing, and the connection is closed (the
// agent reconnects and sends its templates again); anything wrong inside a
// well-framed message is refused on its own.
//
// The records of consecutive messages are handed on together (handOffLimits):
// while some wait, the connection's read deadline is when they are due, so a
// read that would wait past it hands them on first. The hand-off happens on
// the reading goroutine, as each message's did: the connection is read only
// as fast as the next consumer takes the records, and the agent is pushed
// back through TCP.
func (r *antreaReceiver) serveIPFIXConn(conn net.Conn) {
	ctx := context.Background()
	transport, authenticated := viaTCP, false
	if r.tlsCfg != nil {
		tc := tls.Server(conn, r.tlsCfg)
		hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			r.handshakeFailed(ctx, conn.RemoteAddr(), err)
			return
		}
		conn, transport = tc, viaTLS
		st := tc.ConnectionState()
		authenticated = verifiedPeer(&st)
	}
	r.tel.ReceiverAntreaFlowsSessions.Add(ctx, 1)
	defer r.tel.ReceiverAntreaFlowsSessions.Add(ctx, -1)

	s := newBoundedSession(0, r.templates)
	defer s.close()
	b := r.newBatch()
	var due time.Time // when b's records are to be handed on; zero while it is empty
	handOn := func() {
		r.handOn(ctx, b, transport, authenticated)
		if !due.IsZero() {
			due = time.Time{}
			_ = conn.SetReadDeadline(due)
		}
	}
	defer handOn() // the session ended (the agent closed it, an error, shutdown)
	// A message is read in place (the buffer holds the largest one), so a
	// read that times out half-way keeps what it read.
	rd := bufio.NewReaderSize(conn, 64<<10)
	for {
		hdr, err := rd.Peek(msgHeaderLen)
		if err == nil {
			if _, err := readHeader(hdr); err != nil {
				r.refused(ctx, reasonMalformedMessage, 1, err)
				r.set.Logger.Warn("antrea_flows: not an IPFIX message header; closing the connection", zap.Stringer("exporter", conn.RemoteAddr()), zap.Error(err))
				return
			}
		}
		var msg []byte
		if err == nil {
			msg, err = rd.Peek(int(binary.BigEndian.Uint16(hdr[2:])))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && !due.IsZero() {
			handOn()
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				r.set.Logger.Debug("antrea_flows: ipfix connection ended", zap.Stringer("exporter", conn.RemoteAddr()), zap.Error(err))
			}
			return
		}
		now := time.Now()
		r.handleMessage(ctx, s, msg, now, b, transport, conn.RemoteAddr())
		_, _ = rd.Discard(len(msg))
		switch {
		case b.n >= r.handOff.records || !due.IsZero() && !now.Before(due):
			handOn()
		case b.n > 0 && due.IsZero():
			due = now.Add(r.handOff.delay)
			_ = conn.SetReadDeadline(due)
		}
	}
}

func (r *antreaReceiver) handleMessage(ctx context.Context, s *session, msg []byte, now time.Time, b *batch, transport transportName, from net.Addr) {
	res, err := s.decode(msg, now)
	if err != nil {
		r.refused(ctx, reasonMalformedMessage, 1, err)
		r.set.Logger.Warn("antrea_flows: IPFIX message refused", zap.Stringer("exporter", from), zap.Error(err))
		return
	}
	r.handleResult(ctx, res, b, transport, from)
}

// handleResult counts what decoding a message refused and collects the rest
// into b.
func (r *antreaReceiver) handleResult(ctx context.Context, res messageResult, b *batch, transport transportName, from net.Addr) {
	for reason, n := range res.refused {
		r.refused(ctx, reason, n, res.firstErr)
	}
	if len(res.refused) > 0 {
		r.set.Logger.Warn("antrea_flows: part of an IPFIX message refused", zap.Stringer("exporter", from), zap.Error(res.firstErr))
	}
	r.collect(ctx, b, res.records, transport)
}
