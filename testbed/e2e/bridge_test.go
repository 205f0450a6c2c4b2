//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

// bridge joins 127.0.0.1 in the test's namespace to the IPFIX collector in its
// own namespace (its API port is fixed, so it cannot share ours), so the
// gateways reach it without any address outside test namespaces. It forwards
// whole IPFIX messages.
//
// For the collector-restart fault it stands in for the collector host's TCP
// stack: pause stops handing messages on (between two messages), and cut drops
// the gateways' connections the way a dying collector does. The messages TCP
// had already acknowledged to a gateway that the collector never got are
// decoded with the templates seen on the connection, so the test knows which
// records they held: no IPFIX exporter can know of those (IPFIX has no
// acknowledgement of its own).
type bridge struct {
	addr string
	col  *ipfixcollector.Collector

	t  testing.TB
	wg sync.WaitGroup

	mu       sync.Mutex
	ln       net.Listener // nil while the collector is down: connections are refused
	paused   bool
	resume   chan struct{} // closed when a pause ends
	links    map[*link]bool
	lost     int             // data records acknowledged, never handed on
	lostFlow map[flowID]bool // their protocol and source port
	partial  int             // bytes of messages cut short
}

type flowID struct {
	proto uint8
	sport uint16
}

type link struct {
	in, out   net.Conn
	done      chan struct{}
	templates map[uint16][]ipfixField
}

type ipfixField struct {
	id         uint16
	length     uint16
	enterprise uint32
}

func startBridge(t testing.TB, col *ipfixcollector.Collector) *bridge {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &bridge{addr: ln.Addr().String(), col: col, t: t, links: map[*link]bool{}, resume: make(chan struct{}), lostFlow: map[flowID]bool{}}
	close(b.resume)
	t.Cleanup(func() {
		b.mu.Lock()
		if b.ln != nil {
			b.ln.Close()
		}
		b.mu.Unlock()
		b.reset()
		b.wg.Wait()
	})
	b.serve(ln)
	return b
}

// serve accepts the gateways' connections on ln and links each to the collector.
func (b *bridge) serve(ln net.Listener) {
	b.mu.Lock()
	b.ln = ln
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := b.col.Netns().DialContext(context.Background(), "tcp", b.col.Endpoint())
			if err != nil {
				in.Close()
				continue
			}
			l := &link{in: in, out: out, done: make(chan struct{}), templates: map[uint16][]ipfixField{}}
			b.mu.Lock()
			b.links[l] = true
			b.mu.Unlock()
			b.wg.Add(2)
			go func() { defer b.wg.Done(); b.forward(l) }()
			go func() { defer b.wg.Done(); b.back(l) }()
		}
	}()
}

// forward copies a gateway's messages to the collector, waiting while paused.
// Once the link is cut, it reads on until the deadline cut set and accounts
// for every message TCP acknowledged.
func (b *bridge) forward(l *link) {
	defer close(l.done)
	defer b.drop(l)
	for {
		msg, err := readMessage(l.in)
		if err != nil {
			b.mu.Lock()
			b.partial += len(msg)
			b.mu.Unlock()
			return
		}
		l.learn(msg)
		b.mu.Lock()
		resume := b.resume
		b.mu.Unlock()
		<-resume
		if !b.alive(l) {
			b.lose(l, msg)
			continue // drain: read what TCP acknowledged, until the deadline
		}
		if _, err := l.out.Write(msg); err != nil {
			b.lose(l, msg)
			return
		}
	}
}

// back copies the collector's bytes (none in IPFIX, but a close) to the gateway.
func (b *bridge) back(l *link) {
	buf := make([]byte, 4096)
	for {
		n, err := l.out.Read(buf)
		if n > 0 {
			if _, err := l.in.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if b.alive(l) {
		b.drop(l)
	}
}

// readMessage reads one IPFIX message; on error it returns what it read.
func readMessage(r io.Reader) ([]byte, error) {
	head := make([]byte, 16)
	if n, err := io.ReadFull(r, head); err != nil {
		return head[:n], err
	}
	if binary.BigEndian.Uint16(head) != 10 {
		return head, errors.New("not an IPFIX message")
	}
	msg := make([]byte, binary.BigEndian.Uint16(head[2:]))
	copy(msg, head)
	if n, err := io.ReadFull(r, msg[16:]); err != nil {
		return msg[:16+n], err
	}
	return msg, nil
}

// sets calls fn for each set of a message.
func sets(msg []byte, fn func(id uint16, body []byte)) {
	for p := 16; p+4 <= len(msg); {
		id, n := binary.BigEndian.Uint16(msg[p:]), int(binary.BigEndian.Uint16(msg[p+2:]))
		if n < 4 || p+n > len(msg) {
			return
		}
		fn(id, msg[p+4:p+n])
		p += n
	}
}

// learn keeps the templates a message defines (template set ID 2).
func (l *link) learn(msg []byte) {
	sets(msg, func(id uint16, body []byte) {
		if id != 2 {
			return
		}
		for p := 0; p+4 <= len(body); {
			tid, count := binary.BigEndian.Uint16(body[p:]), int(binary.BigEndian.Uint16(body[p+2:]))
			p += 4
			var fields []ipfixField
			for range count {
				if p+4 > len(body) {
					return
				}
				f := ipfixField{id: binary.BigEndian.Uint16(body[p:]), length: binary.BigEndian.Uint16(body[p+2:])}
				p += 4
				if f.id&0x8000 != 0 {
					f.id &^= 0x8000
					f.enterprise = binary.BigEndian.Uint32(body[p:])
					p += 4
				}
				fields = append(fields, f)
			}
			l.templates[tid] = fields
		}
	})
}

// lose accounts for the data records of a message the collector never got.
func (b *bridge) lose(l *link, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sets(msg, func(id uint16, body []byte) {
		fields, ok := l.templates[id]
		if id < 256 || !ok {
			return
		}
		for p := 0; p < len(body); {
			var flow flowID
			start := p
			for _, f := range fields {
				n := int(f.length)
				if f.length == 0xffff { // variable length
					if p >= len(body) {
						return
					}
					n, p = int(body[p]), p+1
					if n == 255 {
						n, p = int(binary.BigEndian.Uint16(body[p:])), p+2
					}
				}
				if p+n > len(body) {
					return // padding
				}
				switch {
				case f.enterprise == 0 && f.id == 4 && n == 1:
					flow.proto = body[p]
				case f.enterprise == 0 && f.id == 7 && n == 2:
					flow.sport = binary.BigEndian.Uint16(body[p:])
				}
				p += n
			}
			if p == start {
				return
			}
			b.lost++
			b.lostFlow[flow] = true
		}
	})
}

func (b *bridge) alive(l *link) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.links[l]
}

func (b *bridge) drop(l *link) {
	b.mu.Lock()
	delete(b.links, l)
	b.mu.Unlock()
	if tcp, ok := l.in.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // a reset, as from a collector that died with unread data
	}
	l.in.Close()
	l.out.Close()
}

// pause stops handing messages to the collector; the gateways' writes are
// still acknowledged by TCP, as by a collector that stopped reading.
func (b *bridge) pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.paused {
		b.paused, b.resume = true, make(chan struct{})
	}
}

// cut drops every connection as a collector that exits does, after
// accounting for what TCP acknowledged on it, and stops listening: until
// restore, connecting is refused, as by a host where nothing listens.
func (b *bridge) cut() {
	b.mu.Lock()
	ln := b.ln
	b.ln = nil
	b.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	b.reset()
}

// restore listens again on the same address.
func (b *bridge) restore() {
	ln, err := net.Listen("tcp", b.addr)
	require.NoError(b.t, err, "the bridge cannot listen on %s again", b.addr)
	b.serve(ln)
}

// reset ends every link (its forwarder drains it for 200 ms) and a pause.
func (b *bridge) reset() {
	b.mu.Lock()
	links := b.links
	b.links = map[*link]bool{}
	if b.paused {
		b.paused = false
		close(b.resume)
	}
	b.mu.Unlock()
	for l := range links {
		_ = l.in.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	}
	for l := range links {
		<-l.done
	}
}

// lostRecords returns how many data records TCP acknowledged to the gateways
// that the collector never got, and their (protocol, source port).
func (b *bridge) lostRecords() (int, map[flowID]bool, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	flows := map[flowID]bool{}
	for f := range b.lostFlow {
		flows[f] = true
	}
	return b.lost, flows, b.partial
}

// TestBridgeDecodesLostMessages checks the accounting the collector-restart
// fault relies on: the records of a message the collector never got are found
// with the templates seen on the connection, variable-length fields included.
func TestBridgeDecodesLostMessages(t *testing.T) {
	be := binary.BigEndian
	message := func(sets ...[]byte) []byte {
		msg := make([]byte, 16)
		be.PutUint16(msg, 10)
		for _, s := range sets {
			msg = append(msg, s...)
		}
		be.PutUint16(msg[2:], uint16(len(msg)))
		return msg
	}
	set := func(id uint16, body []byte) []byte {
		s := make([]byte, 4, 4+len(body))
		be.PutUint16(s, id)
		be.PutUint16(s[2:], uint16(4+len(body)))
		return append(s, body...)
	}
	// Template 300: protocolIdentifier (4, 1 byte), sourceTransportPort (7, 2
	// bytes), an enterprise string of variable length (56506/101).
	tmpl := []byte{1, 44, 0, 3, 0, 4, 0, 1, 0, 7, 0, 2, 0x80, 101, 0xff, 0xff, 0, 0, 0xdc, 0xba}
	rec := func(proto uint8, port uint16, name string) []byte {
		r := []byte{proto, byte(port >> 8), byte(port), byte(len(name))}
		return append(r, name...)
	}
	data := append(rec(6, 43001, "client-a"), rec(17, 53, "")...)
	data = append(data, 0, 0) // padding

	l := &link{templates: map[uint16][]ipfixField{}}
	b := &bridge{lostFlow: map[flowID]bool{}}
	l.learn(message(set(2, tmpl)))
	msg := message(set(300, data))
	got, err := readMessage(bytes.NewReader(msg))
	require.NoError(t, err)
	b.lose(l, got)
	n, flows, _ := b.lostRecords()
	require.Equal(t, 2, n)
	require.Equal(t, map[flowID]bool{{6, 43001}: true, {17, 53}: true}, flows)

	// Without the template nothing can be said about a message's records.
	b2 := &bridge{lostFlow: map[flowID]bool{}}
	b2.lose(&link{templates: map[uint16][]ipfixField{}}, msg)
	n, _, _ = b2.lostRecords()
	require.Zero(t, n)
}
