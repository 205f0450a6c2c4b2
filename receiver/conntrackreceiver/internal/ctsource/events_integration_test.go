//go:build integration

package ctsource

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// testNamespace is a new network namespace, removed at the end of the test.
func testNamespace(t *testing.T, name string) *Namespace {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and conntrack entries")
	}
	name = fmt.Sprintf("%s%d", name, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	ns, err := OpenNamespace("/var/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// churnBurst creates n UDP entries in ns from source ports 1024… and then
// deletes them all: n DESTROY events.
func churnBurst(t *testing.T, ns *Namespace, n int) {
	t.Helper()
	c, err := conntrack.Dial(&netlink.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, dst := netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.2.0.1")
	flows := make([]conntrack.Flow, n)
	for i := range flows {
		flows[i] = conntrack.NewFlow(17, 0, src, dst, uint16(1024+i), 53, 30, 0)
		if err := c.Create(flows[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range flows {
		if err := c.Delete(flows[i]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEventsBurstArrivesWhole: a burst of DESTROY events several times a
// read's batch arrives whole, each event once, in reads of at most
// eventBatch; Run returns nil when its context ends. The socket's buffer is
// the full eventReadBuffer, above net.core.rmem_max.
func TestEventsBurstArrivesWhole(t *testing.T) {
	ns := testNamespace(t, "fcev")
	ev, err := ListenDestroy(ns)
	if err != nil {
		t.Fatal(err)
	}
	var rcvbuf int
	if rcvbuf, err = unix.GetsockoptInt(ev.fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err != nil {
		t.Fatal(err)
	}
	if rcvbuf < 2*eventReadBuffer { // the kernel reports twice what was asked
		t.Fatalf("event socket buffer %d bytes, want %d whatever net.core.rmem_max says", rcvbuf, 2*eventReadBuffer)
	}
	const n = 5 * eventBatch
	seen := make(chan []uint16, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ev.Run(ctx, func(cs []store.Conn) {
			ports := make([]uint16, len(cs))
			for i := range cs {
				ports[i] = cs[i].SrcPort
			}
			seen <- ports
		})
	}()
	churnBurst(t, ns, n)
	got := map[uint16]int{}
	reads := 0
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case ports := <-seen:
			reads++
			if len(ports) > eventBatch {
				t.Fatalf("one read handed over %d events, more than a batch (%d)", len(ports), eventBatch)
			}
			for _, p := range ports {
				got[p]++
			}
		case <-deadline:
			t.Fatalf("%d of %d DESTROY events arrived", len(got), n)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after its context ended, want nil", err)
	}
	for p, k := range got {
		if p < 1024 || p >= 1024+n || k != 1 {
			t.Fatalf("port %d handed over %d times", p, k)
		}
	}
	if reads < n/eventBatch {
		t.Fatalf("%d events in %d reads", n, reads)
	}
}

// TestEventsRunAfterShutdownDrains: events still in the socket when the
// context ends are handed over before Run returns (the receiver's last poll
// then applies them).
func TestEventsRunAfterShutdownDrains(t *testing.T) {
	ns := testNamespace(t, "fcsd")
	ev, err := ListenDestroy(ns)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3*eventBatch + 7
	churnBurst(t, ns, n)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := 0
	if err := ev.Run(ctx, func(cs []store.Conn) { got += len(cs) }); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("Run with its context ended handed over %d events of the %d in the socket", got, n)
	}
}
