//go:build integration

package conntrackreceiver

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
)

// lab is a three-namespace topology the tests create: a client, a "Node"
// (the router whose conntrack table the receiver reads) and a server, joined
// by veth pairs. Every address lives inside these namespaces; deleting them
// removes the veths, addresses and iptables rules with them.
//
//	cli c0 10.201.1.2 fd01:1::2 ── n1 10.201.1.1 fd01:1::1 [node] n2 10.201.2.1 fd01:2::1 ── s0 10.201.2.2 fd01:2::2 srv
type lab struct {
	t              *testing.T
	cli, node, srv string
}

var labSeq atomic.Int32

const (
	cliV4, nodeCliV4, nodeSrvV4, srvV4 = "10.201.1.2", "10.201.1.1", "10.201.2.1", "10.201.2.2"
	cliV6, nodeCliV6, nodeSrvV6, srvV6 = "fd01:1::2", "fd01:1::1", "fd01:2::1", "fd01:2::2"
	clusterIPV4, clusterIPV6           = "10.96.0.10", "fd00:96::10"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and reads conntrack (CI runs as root)")
	}
	for _, tool := range []string{"ip", "iptables", "ip6tables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install iproute2 and iptables (apt-get install iproute2 iptables)", tool)
		}
	}
}

func newLab(t *testing.T) *lab {
	t.Helper()
	requireRoot(t)
	id := fmt.Sprintf("fct%d-%d", os.Getpid(), labSeq.Add(1))
	l := &lab{t: t, cli: id + "-cli", node: id + "-node", srv: id + "-srv"}
	for _, ns := range []string{l.cli, l.node, l.srv} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		l.in(ns, "ip", "link", "set", "lo", "up")
	}
	run(t, "ip", "link", "add", "c0", "netns", l.cli, "type", "veth", "peer", "name", "n1", "netns", l.node)
	run(t, "ip", "link", "add", "n2", "netns", l.node, "type", "veth", "peer", "name", "s0", "netns", l.srv)
	for _, a := range []struct{ ns, dev, v4, v6 string }{
		{l.cli, "c0", cliV4, cliV6}, {l.node, "n1", nodeCliV4, nodeCliV6},
		{l.node, "n2", nodeSrvV4, nodeSrvV6}, {l.srv, "s0", srvV4, srvV6},
	} {
		l.in(a.ns, "ip", "addr", "add", a.v4+"/24", "dev", a.dev)
		l.in(a.ns, "ip", "addr", "add", a.v6+"/64", "dev", a.dev, "nodad")
		l.in(a.ns, "ip", "link", "set", a.dev, "up")
	}
	l.in(l.cli, "ip", "route", "add", "default", "via", nodeCliV4)
	l.in(l.cli, "ip", "-6", "route", "add", "default", "via", nodeCliV6)
	l.in(l.srv, "ip", "route", "add", "default", "via", nodeSrvV4)
	l.in(l.srv, "ip", "-6", "route", "add", "default", "via", nodeSrvV6)
	l.in(l.node, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	return l
}

// kubeProxy installs what kube-proxy would for a ClusterIP Service: DNAT of
// ClusterIP:80/tcp to the server's 8080 and ClusterIP:53/udp to its 5353,
// and masquerade towards the server, in both families.
func (l *lab) kubeProxy() {
	l.in(l.node, "iptables", "-t", "nat", "-A", "PREROUTING", "-d", clusterIPV4, "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", srvV4+":8080")
	l.in(l.node, "iptables", "-t", "nat", "-A", "PREROUTING", "-d", clusterIPV4, "-p", "udp", "--dport", "53", "-j", "DNAT", "--to-destination", srvV4+":5353")
	l.in(l.node, "ip6tables", "-t", "nat", "-A", "PREROUTING", "-d", clusterIPV6, "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", "["+srvV6+"]:8080")
	l.in(l.node, "ip6tables", "-t", "nat", "-A", "PREROUTING", "-d", clusterIPV6, "-p", "udp", "--dport", "53", "-j", "DNAT", "--to-destination", "["+srvV6+"]:5353")
	l.in(l.node, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", "n2", "-j", "MASQUERADE")
	l.in(l.node, "ip6tables", "-t", "nat", "-A", "POSTROUTING", "-o", "n2", "-j", "MASQUERADE")
	// The client routes ClusterIPs to the Node like any other destination.
}

// both runs the same iptables arguments for IPv4 and IPv6.
func (l *lab) both(args ...string) {
	l.in(l.node, append([]string{"iptables"}, args...)...)
	l.in(l.node, append([]string{"ip6tables"}, args...)...)
}

func (l *lab) in(ns string, args ...string) {
	l.t.Helper()
	run(l.t, append([]string{"ip", "netns", "exec", ns}, args...)...)
}

func (l *lab) path(ns string) string { return "/var/run/netns/" + ns }

// do runs fn inside namespace ns (sockets it opens stay there).
func (l *lab) do(ns string, fn func() error) {
	l.t.Helper()
	n, err := ctsource.OpenNamespace(l.path(ns))
	if err != nil {
		l.t.Fatal(err)
	}
	defer n.Close()
	if err := n.Do(fn); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lab) listenTCP(ns, addr string) net.Listener {
	l.t.Helper()
	var ln net.Listener
	l.do(ns, func() (err error) { ln, err = net.Listen("tcp", addr); return err })
	l.t.Cleanup(func() { ln.Close() })
	return ln
}

func (l *lab) dialTCP(ns, addr string) net.Conn {
	l.t.Helper()
	var c net.Conn
	l.do(ns, func() (err error) { c, err = net.Dial("tcp", addr); return err })
	l.t.Cleanup(func() { c.Close() })
	return c
}

func (l *lab) listenUDP(ns, addr string) *net.UDPConn {
	l.t.Helper()
	var c net.PacketConn
	l.do(ns, func() (err error) { c, err = net.ListenPacket("udp", addr); return err })
	l.t.Cleanup(func() { c.Close() })
	return c.(*net.UDPConn)
}

func (l *lab) dialUDP(ns, addr string) *net.UDPConn {
	l.t.Helper()
	var c net.Conn
	l.do(ns, func() (err error) { c, err = net.Dial("udp", addr); return err })
	l.t.Cleanup(func() { c.Close() })
	return c.(*net.UDPConn)
}

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func addrPort(t *testing.T, a net.Addr) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
