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

// serveIPFIXConn reads one exporter's IPFIX stream (TCP, or TLS after the
// handshake) until it ends. The message header frames the stream: a header
// that is not IPFIX's loses the framing, and the connection is closed (the
// agent reconnects and sends its templates again); anything wrong inside a
// well-framed message is refused on its own.
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
	rd := bufio.NewReaderSize(conn, 64<<10)
	var msg []byte
	for {
		hdr, err := rd.Peek(msgHeaderLen)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				r.set.Logger.Debug("antrea_flows: ipfix connection ended", zap.Stringer("exporter", conn.RemoteAddr()), zap.Error(err))
			}
			return
		}
		if _, err := readHeader(hdr); err != nil {
			r.refused(ctx, reasonMalformedMessage, 1, err)
			r.set.Logger.Warn("antrea_flows: not an IPFIX message header; closing the connection", zap.Stringer("exporter", conn.RemoteAddr()), zap.Error(err))
			return
		}
		n := int(binary.BigEndian.Uint16(hdr[2:]))
		msg = slices.Grow(msg[:0], n)[:n]
		if _, err := io.ReadFull(rd, msg); err != nil {
			return
		}
		r.handleMessage(ctx, s, msg, transport, authenticated, conn.RemoteAddr())
	}
}

func (r *antreaReceiver) handleMessage(ctx context.Context, s *session, msg []byte, transport transportName, authenticated bool, from net.Addr) {
	res, err := s.decode(msg, time.Now())
	if err != nil {
		r.refused(ctx, reasonMalformedMessage, 1, err)
		r.set.Logger.Warn("antrea_flows: IPFIX message refused", zap.Stringer("exporter", from), zap.Error(err))
		return
	}
	r.handleResult(ctx, res, transport, authenticated, from)
}

// handleResult counts what decoding a message refused and delivers the rest.
func (r *antreaReceiver) handleResult(ctx context.Context, res messageResult, transport transportName, authenticated bool, from net.Addr) {
	for reason, n := range res.refused {
		r.refused(ctx, reason, n, res.firstErr)
	}
	if len(res.refused) > 0 {
		r.set.Logger.Warn("antrea_flows: part of an IPFIX message refused", zap.Stringer("exporter", from), zap.Error(res.firstErr))
	}
	r.deliver(ctx, res.records, transport, authenticated)
}
