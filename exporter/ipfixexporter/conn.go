package ipfixexporter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// dialFunc opens a connection to the collector. Tests replace it to dial from
// inside a network namespace; production uses dialCollector.
type dialFunc func(ctx context.Context, network, address string, tlsCfg *tls.Config) (net.Conn, error)

// dialCollector dials TCP or UDP, and does the TLS handshake when tlsCfg is
// set, all bounded by ctx. Stream connections are wrapped to count the bytes put
// on the wire, which the TCP acknowledgement counter is compared with.
func dialCollector(ctx context.Context, network, address string, tlsCfg *tls.Config) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, address)
	if err != nil || network != "tcp" {
		return c, err
	}
	cc := &countingConn{Conn: c}
	if tlsCfg == nil {
		return cc, nil
	}
	if tlsCfg.ServerName == "" {
		// As tls.Dial does: verify the certificate against the endpoint's host.
		host, _, _ := net.SplitHostPort(address)
		tlsCfg = tlsCfg.Clone()
		tlsCfg.ServerName = host
	}
	tc := tls.Client(cc, tlsCfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", address, err)
	}
	return tc, nil
}

// countingConn counts the bytes written to a TCP connection.
type countingConn struct {
	net.Conn
	wire atomic.Uint64
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.wire.Add(uint64(n))
	return n, err
}

// connection is one session with the collector.
type connection struct {
	net.Conn
	stream bool // TCP or TLS: a byte stream whose peer can close it
	// peerClosed is closed when the collector closes or resets a stream
	// connection (a collector never sends anything, so any read ends it).
	peerClosed chan struct{}
	// peerErr is why the read ended (EOF, a reset, a TLS alert); set before peerClosed closes.
	peerErr    error
	readerDone sync.WaitGroup
	// written counts the bytes written, to compare with what TCP saw acknowledged.
	written uint64
}

func newConnection(c net.Conn, stream bool) *connection {
	conn := &connection{Conn: c, stream: stream, peerClosed: make(chan struct{})}
	if stream {
		conn.readerDone.Add(1)
		go func() {
			defer conn.readerDone.Done()
			var b [1]byte
			for {
				if _, err := c.Read(b[:]); err != nil {
					conn.peerErr = err
					close(conn.peerClosed)
					return
				}
			}
		}()
	}
	return conn
}

// alive reports whether the peer has not closed the connection (as far as we know).
func (c *connection) alive() bool {
	select {
	case <-c.peerClosed:
		return false
	default:
		return true
	}
}

func (c *connection) write(b []byte) error {
	n, err := c.Write(b)
	c.written += uint64(n)
	if err == nil && n != len(b) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(b))
	}
	if err != nil && c.stream {
		// The collector's reason (a TLS alert, a reset) says more than EPIPE.
		select {
		case <-c.peerClosed:
			err = fmt.Errorf("%w (connection closed by the collector: %v)", err, c.peerErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return err
}

// unacknowledged returns how many of the bytes written (at the application
// level) may not have reached the collector's host: the bytes TCP has not seen
// acknowledged. Over TLS this over-estimates by the record overhead, which only
// means a few more records are resent. ok is false when it cannot be known.
func (c *connection) unacknowledged() (uint64, bool) {
	var cc *countingConn
	switch nc := c.Conn.(type) {
	case *countingConn:
		cc = nc
	case *tls.Conn:
		cc, _ = nc.NetConn().(*countingConn)
	}
	if cc == nil {
		return 0, false
	}
	tcp, ok := cc.Conn.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var serr error
	if err := raw.Control(func(fd uintptr) { info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || serr != nil {
		return 0, false
	}
	// bytes_acked also counts the SYN's sequence number; treating one more byte
	// as unacknowledged errs on the side of resending.
	acked := info.Bytes_acked
	if acked > 0 {
		acked--
	}
	wire := cc.wire.Load()
	if acked >= wire {
		return 0, true
	}
	return min(wire-acked, c.written), true
}

// close closes the connection and waits for its reader.
func (c *connection) close() error {
	err := c.Close()
	c.readerDone.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
