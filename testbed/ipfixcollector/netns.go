package ipfixcollector

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowtel/flowtel/testbed/netnsjoin"
)

// Netns is a named network namespace (/run/netns/<Name>).
type Netns struct {
	Name string
}

var netnsCount atomic.Int32

// RequireRoot skips the test when not run as root: namespaces need it. CI runs
// as root, where nothing is skipped.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs the IPFIX collector in a network namespace")
	}
}

// NewNetns creates a namespace with loopback up, deleted when the test ends
// (also when it fails). Deleting it removes every rule and socket in it.
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	RequireRoot(t)
	name := fmt.Sprintf("flowtel-ipfixc-%dx%d", os.Getpid(), netnsCount.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	n := &Netns{Name: name}
	if out, err := n.Exec("ip", "link", "set", "lo", "up"); err != nil {
		t.Fatalf("%s: lo up: %v: %s", name, err, out)
	}
	return n
}

// Path is the namespace's file, as setns(2) and the conntrack receiver take it.
func (n *Netns) Path() string { return "/run/netns/" + n.Name }

// Command returns an unstarted command that runs in the namespace.
func (n *Netns) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Exec runs a command in the namespace and returns its combined output.
func (n *Netns) Exec(name string, args ...string) (string, error) {
	out, err := n.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in %s: %s %s: %w: %s", n.Name, name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Do runs fn on an OS thread switched into the namespace: sockets fn creates
// live there and stay there after Do returns.
func (n *Netns) Do(fn func() error) error { return netnsjoin.Do(n.Path(), fn) }

// DialContext dials from inside the namespace.
func (n *Netns) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return netnsjoin.DialContext(ctx, n.Path(), network, address)
}
