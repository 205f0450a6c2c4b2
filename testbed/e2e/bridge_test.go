package e2e

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

// bridge joins 127.0.0.1 in the test's namespace to the IPFIX collector in its
// own namespace (its API port is fixed, so it cannot share ours), so the
// gateways reach it without any address outside test namespaces.
//
// For the collector-restart fault it stands in for the collector host's TCP
// stack: pause stops handing bytes on, and reset drops the gateways'
// connections the way a dying collector does, counting the bytes that TCP had
// already acknowledged to a gateway but the collector never read. No IPFIX
// exporter can know of those (IPFIX has no acknowledgement of its own).
type bridge struct {
	addr string
	col  *ipfixcollector.Collector

	mu        sync.Mutex
	paused    bool
	down      bool          // refuse new connections (the collector is down)
	resume    chan struct{} // closed when a pause ends
	links     map[*link]bool
	discarded int64 // acknowledged to a gateway, never handed to the collector
}

type link struct{ in, out net.Conn }

func startBridge(t testing.TB, col *ipfixcollector.Collector) *bridge {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &bridge{addr: ln.Addr().String(), col: col, links: map[*link]bool{}, resume: make(chan struct{})}
	close(b.resume)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); b.reset(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			down := b.down
			b.mu.Unlock()
			var out net.Conn
			if !down {
				out, err = col.Netns().DialContext(context.Background(), "tcp", col.Endpoint())
			}
			if down || err != nil {
				in.Close() // the collector is down: the gateway sees its connection end
				continue
			}
			l := &link{in: in, out: out}
			b.mu.Lock()
			b.links[l] = true
			b.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); b.forward(l) }()
			go func() { defer wg.Done(); b.back(l) }()
		}
	}()
	return b
}

// forward copies a gateway's bytes to the collector, waiting while paused.
func (b *bridge) forward(l *link) {
	defer b.drop(l)
	buf := make([]byte, 32*1024)
	for {
		n, err := l.in.Read(buf)
		if n > 0 {
			b.mu.Lock()
			resume := b.resume
			b.mu.Unlock()
			<-resume
			if !b.alive(l) {
				b.count(int64(n))
				return
			}
			if _, werr := l.out.Write(buf[:n]); werr != nil {
				b.count(int64(n))
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// back copies the collector's bytes (none in IPFIX, but a close) to the gateway.
func (b *bridge) back(l *link) {
	defer b.drop(l)
	buf := make([]byte, 4096)
	for {
		n, err := l.out.Read(buf)
		if n > 0 {
			if _, err := l.in.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (b *bridge) alive(l *link) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.links[l]
}

func (b *bridge) count(n int64) {
	b.mu.Lock()
	b.discarded += n
	b.mu.Unlock()
}

func (b *bridge) drop(l *link) {
	b.mu.Lock()
	delete(b.links, l)
	b.mu.Unlock()
	l.in.Close()
	l.out.Close()
}

// pause stops handing bytes to the collector; the gateways' writes are still
// acknowledged by TCP, as by a collector that stopped reading.
func (b *bridge) pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.paused {
		b.paused, b.resume = true, make(chan struct{})
	}
}

// cut drops every connection as a collector that exits does (RST), counts
// the bytes acknowledged to the gateways that the collector never got, and
// refuses new connections until restore.
func (b *bridge) cut() {
	b.mu.Lock()
	b.down = true
	b.mu.Unlock()
	b.reset()
}

// restore lets connections through again.
func (b *bridge) restore() {
	b.mu.Lock()
	b.down = false
	b.mu.Unlock()
}

// reset drops every connection and ends a pause.
func (b *bridge) reset() {
	b.mu.Lock()
	links := b.links
	b.links = map[*link]bool{}
	b.mu.Unlock()
	for l := range links {
		// What still sits in the receive buffer was acknowledged, never read.
		_ = l.in.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		buf := make([]byte, 32*1024)
		for {
			n, err := l.in.Read(buf)
			b.count(int64(n))
			if err != nil {
				break
			}
		}
		if tcp, ok := l.in.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		l.in.Close()
		l.out.Close()
	}
	b.mu.Lock()
	if b.paused {
		b.paused = false
		close(b.resume)
	}
	b.mu.Unlock()
}

// acknowledgedNotRead is the number of bytes the gateways wrote that TCP
// acknowledged and the collector never received.
func (b *bridge) acknowledgedNotRead() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.discarded
}
