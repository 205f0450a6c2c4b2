//go:build integration

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// observer runs `flowctl observe ... -f -o jsonl` and hands its stdout over
// line by line.
type observer struct {
	lines  chan string
	stderr syncBuffer
	code   int
	done   chan struct{} // closed when flowctl has returned code
	cancel context.CancelFunc
}

func startObserver(t *testing.T, args ...string) *observer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{lines: make(chan string, 1000), done: make(chan struct{}), cancel: cancel}
	pr, pw := io.Pipe()
	go func() {
		o.code = run(ctx, args, pw, &o.stderr)
		pw.Close()
		close(o.done)
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			o.lines <- sc.Text()
		}
		close(o.lines)
	}()
	t.Cleanup(func() {
		cancel()
		<-o.done
	})
	return o
}

// next returns the next n lines of output.
func (o *observer) next(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		select {
		case l, ok := <-o.lines:
			require.True(t, ok, "flowctl ended; stderr:\n%s", o.stderr.String())
			out = append(out, l)
		case <-time.After(30 * time.Second):
			t.Fatalf("waited 30 s for line %d of %d; got %q; stderr:\n%s", len(out)+1, n, out, o.stderr.String())
		}
	}
	return out
}

// ids of flow lines; a gap line is "gap:<reason>:<lost>".
func lineIDs(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, `{"gap":`) {
			var g struct {
				Gap struct {
					Reason string
					Lost   *uint64
					Time   time.Time
				}
			}
			require.NoError(t, json.Unmarshal([]byte(l), &g), l)
			require.False(t, g.Gap.Time.IsZero(), l)
			lost := "?"
			if g.Gap.Lost != nil {
				lost = fmt.Sprint(*g.Gap.Lost)
			}
			out = append(out, "gap:"+g.Gap.Reason+":"+lost)
			continue
		}
		out = append(out, decodeLines(t, l)[0].Id)
	}
	return out
}

func keyed(prefix string, n int) ([]*flowrecord.Record, []string) {
	var recs []*flowrecord.Record
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		recs = append(recs, record(id, "ns-a", "web", "ns-b", "api", time.Now()))
		ids = append(ids, id)
	}
	return recs, ids
}

// `flowctl observe -f` outlives a network cut and a gateway restart: it
// reconnects by itself, prints every flow once, and reports what it lost.
func TestObserveFollowResumes(t *testing.T) {
	e := startEnvWith(t, map[string]any{"buffer_size": 64})
	kc := e.user(t, "dev", "ns-a")
	p := newCutProxy(t, e.addr)
	o := startObserver(t, "observe", "--kubeconfig", kc, "--stream-server", p.addr, "--stream-tls-server-name", "127.0.0.1", "--ca-file", e.ca,
		"-n", "ns-a", "-f", "-o", "jsonl")

	recs, want := keyed("before", 2)
	e.push(t, recs...)
	require.Equal(t, want, lineIDs(t, o.next(t, 2)))

	t.Run("network cut", func(t *testing.T) {
		p.cut()
		recs, want := keyed("during-cut", 3)
		e.push(t, recs...)
		other := record("elsewhere", "ns-b", "api", "ns-c", "db", time.Now()) // out of scope
		e.push(t, other)
		p.restore(t)
		require.Equal(t, want, lineIDs(t, o.next(t, 3)), "the flows of the cut, once, no gap")
		recs, want = keyed("after-cut", 1)
		e.push(t, recs...)
		require.Equal(t, want, lineIDs(t, o.next(t, 1)), "nothing printed twice")
		require.Contains(t, o.stderr.String(), "flowctl: stream lost (")
		require.Contains(t, o.stderr.String(), "flowctl: reconnected: resuming where the stream left off")
	})

	t.Run("a cut longer than the buffer", func(t *testing.T) {
		p.cut()
		recs, want := keyed("overrun", 100) // the buffer holds 64
		e.push(t, recs...)
		p.restore(t)
		got := lineIDs(t, o.next(t, 65))
		require.Equal(t, "gap:disconnected:36", got[0], "what the buffer overwrote, counted")
		require.Equal(t, want[36:], got[1:])
		require.Contains(t, o.stderr.String(), "flowctl: up to 36 flows lost while reconnecting")
	})

	t.Run("gateway restart", func(t *testing.T) {
		e.restart(t)
		recs, want := keyed("after-restart", 2)
		e.push(t, recs...)
		got := lineIDs(t, o.next(t, 3))
		require.Equal(t, "gap:server_restarted:?", got[0], "how much is lost is unknown")
		require.Equal(t, want, got[1:])
		require.Contains(t, o.stderr.String(), "flowctl: stream lost (the server ended it): reconnecting")
		require.Contains(t, o.stderr.String(), "flowctl: the flow stream restarted")
	})

	o.cancel()
	<-o.done
	require.Zero(t, o.code, o.stderr.String())
}

// A following stream ends at an answer reconnecting cannot change.
func TestObserveFollowStopsWhenDenied(t *testing.T) {
	e := startEnv(t)
	kc := e.user(t, "nobody")
	_, errOut, code := flowctl(context.Background(), "observe", "--kubeconfig", kc, "--stream-server", e.addr, "--ca-file", e.ca, "-n", "ns-a", "-f")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "permission denied")
	require.NotContains(t, errOut, "reconnecting")
}

// cutProxy forwards TCP to a target until cut, which closes every
// connection and refuses new ones until restore: a network outage.
type cutProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
	wg           sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{addr: ln.Addr().String(), target: target}
	p.serve(ln)
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.serve(ln)
}
