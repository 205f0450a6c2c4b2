package netnsjoin

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// newNetns makes a named network namespace for the test (root and ip needed).
func newNetns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	name := fmt.Sprintf("flowtel-netnsjoin-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", name).Run() })
	return "/run/netns/" + name
}

func TestDoJoinsAndReturns(t *testing.T) {
	path := newNetns(t)
	own := inode(t, "/proc/thread-self/ns/net")
	var inside uint64
	if err := Do(path, func() error { inside = inode(t, "/proc/thread-self/ns/net"); return nil }); err != nil {
		t.Fatal(err)
	}
	if inside != inode(t, path) || inside == own {
		t.Fatalf("fn ran in namespace %d, want %d (own %d)", inside, inode(t, path), own)
	}
	if got := inode(t, "/proc/thread-self/ns/net"); got != own {
		t.Fatalf("after Do the thread is in namespace %d, want its own %d", got, own)
	}
	want := fmt.Errorf("from fn")
	if err := Do(path, func() error { return want }); err != want {
		t.Fatalf("Do returned %v, want fn's error", err)
	}
	if err := Do(path+"-missing", func() error { t.Fatal("fn ran"); return nil }); err == nil {
		t.Fatal("no error for a namespace that does not exist")
	}
}

func TestDialContextDialsInside(t *testing.T) {
	path := newNetns(t)
	// A listener on this namespace's loopback is not reachable from the new
	// namespace, whose loopback is down and has no such port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if c, err := DialContext(context.Background(), path, "tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("dialled this namespace's loopback from inside the other one")
	}
	c, err := DialContext(context.Background(), "/proc/self/ns/net", "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dialling from the own namespace: %v", err)
	}
	c.Close()
}
