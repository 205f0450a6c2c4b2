// Package netlab builds a Kubernetes-like network out of Linux network
// namespaces: Node namespaces joined by a transport network, Pod namespaces
// routed behind each Node, kube-proxy-like iptables rules for Services, and an
// external client. It is the data plane of flowtel's testbed: real kernels,
// real conntrack, real NAT, with every address confined to namespaces it created.
//
// Layout (Node i = 1..n; every address family has an IPv4 and an IPv6 twin):
//
//	fabric ns:   bridge br0 joining every Node's and the external host's eth0
//	Node i:      eth0  192.168.77.(10+i)/24  fd00:77::(10+i)/64       (transport, the Node's InternalIP)
//	             gw0   10.244.i.1/24         fd00:244:0:i::1/64       (the podCIDR gateway address)
//	             one veth per Pod, routed (/32, /128) with src = the gateway address
//	             routes to other Nodes' podCIDRs via their transport address with src = the
//	             local gateway address: host-originated traffic to Pods leaves from the
//	             gateway address, the Antrea #8260 condition
//	Pod j on i:  eth0  10.244.i.(10+j)/32    fd00:244:0:i::(10+j)/128, default via the gateway
//	external:    eth0  192.168.77.100/24     fd00:77::100/64
//
// Pods are routed rather than bridged so that all Pod traffic crosses the Node
// namespace's netfilter hooks, as with routed CNIs (and Antrea's OVS conntrack zones).
package netlab

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
)

// Prefix starts the name of every namespace netlab creates; Cleanup removes
// every namespace with it, including leftovers of a crashed run.
const Prefix = "ftb-"

// Node is a Kubernetes Node: a network namespace with a transport address and a podCIDR.
type Node struct {
	Name        string
	NS          string
	Index       int
	TransportV4 netip.Addr
	TransportV6 netip.Addr
	PodCIDRv4   netip.Prefix
	PodCIDRv6   netip.Prefix
	GatewayV4   netip.Addr
	GatewayV6   netip.Addr
	Pods        []*Pod
}

// Pod is a Pod namespace routed behind its Node.
type Pod struct {
	Namespace string // Kubernetes namespace
	Name      string
	NS        string // network namespace
	Node      *Node
	IPv4      netip.Addr
	IPv6      netip.Addr
	hostVeth  string
}

// Host is a namespace on the transport network outside the cluster.
type Host struct {
	NS   string
	IPv4 netip.Addr
	IPv6 netip.Addr
}

// Lab is one mini-cluster's data plane.
type Lab struct {
	run      string // short run id, part of every namespace name
	fabricNS string
	Nodes    []*Node
	External *Host
	created  []string // namespaces, for Close
}

// Cluster (all podCIDRs) and Service address ranges.
var (
	ClusterCIDRv4 = netip.MustParsePrefix("10.244.0.0/16")
	ClusterCIDRv6 = netip.MustParsePrefix("fd00:244::/48")

	ServiceCIDRv4 = netip.MustParsePrefix("10.96.0.0/16")
	ServiceCIDRv6 = netip.MustParsePrefix("fd00:10:96::/108") // as testbed/controlplane's API server
)

// New creates the fabric, n Nodes and the external host. On error everything
// created so far is removed.
func New(ctx context.Context, run string, n int) (_ *Lab, err error) {
	if n < 1 || n > 9 {
		return nil, fmt.Errorf("netlab: %d nodes: want 1 to 9", n)
	}
	l := &Lab{run: run, fabricNS: Prefix + run + "-fabric"}
	defer func() {
		if err != nil {
			_ = l.Close()
		}
	}()
	if err = l.addNS(ctx, l.fabricNS); err != nil {
		return nil, err
	}
	if err = l.in(ctx, l.fabricNS,
		"ip link add br0 type bridge",
		"ip link set br0 up",
	); err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		if err = l.addNode(ctx, i); err != nil {
			return nil, err
		}
	}
	for _, node := range l.Nodes {
		if err = l.routeToOtherNodes(ctx, node); err != nil {
			return nil, err
		}
	}
	l.External = &Host{NS: Prefix + run + "-ext", IPv4: netip.MustParseAddr("192.168.77.100"), IPv6: netip.MustParseAddr("fd00:77::100")}
	if err = l.addNS(ctx, l.External.NS); err != nil {
		return nil, err
	}
	if err = l.plug(ctx, l.External.NS, "ext", l.External.IPv4, l.External.IPv6); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Lab) addNode(ctx context.Context, i int) error {
	node := &Node{
		Name:        fmt.Sprintf("node-%d", i),
		NS:          fmt.Sprintf("%s%s-node%d", Prefix, l.run, i),
		Index:       i,
		TransportV4: netip.MustParseAddr(fmt.Sprintf("192.168.77.%d", 10+i)),
		TransportV6: netip.MustParseAddr(fmt.Sprintf("fd00:77::%d", 10+i)),
		PodCIDRv4:   netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i)),
		PodCIDRv6:   netip.MustParsePrefix(fmt.Sprintf("fd00:244:0:%d::/64", i)),
	}
	node.GatewayV4 = node.PodCIDRv4.Addr().Next()
	node.GatewayV6 = node.PodCIDRv6.Addr().Next()
	if err := l.addNS(ctx, node.NS); err != nil {
		return err
	}
	if err := l.in(ctx, node.NS,
		"sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1",
		"sysctl -qw net.netfilter.nf_conntrack_acct=1 net.netfilter.nf_conntrack_timestamp=1",
		// gw0 is one end of a veth pair whose other end stays in the Node: an
		// interface with carrier that only holds the gateway address (this kernel
		// has no dummy devices).
		"ip link add gw0 type veth peer name gw0p",
		"ip link set gw0p up",
		"ip link set gw0 up",
		fmt.Sprintf("ip addr add %s/%d dev gw0", node.GatewayV4, node.PodCIDRv4.Bits()),
		fmt.Sprintf("ip addr add %s/%d dev gw0 nodad", node.GatewayV6, node.PodCIDRv6.Bits()),
		// ClusterIPs are reached through the gateway as with antrea-gw0, so host traffic
		// to a Service also leaves from the gateway address.
		fmt.Sprintf("ip route add %s dev gw0 src %s", ServiceCIDRv4, node.GatewayV4),
		fmt.Sprintf("ip -6 route add %s dev gw0 src %s", ServiceCIDRv6, node.GatewayV6),
	); err != nil {
		return err
	}
	if err := l.plug(ctx, node.NS, fmt.Sprintf("n%d", i), node.TransportV4, node.TransportV6); err != nil {
		return err
	}
	// Pod traffic leaving the cluster is masqueraded to the Node's address, as
	// CNIs do by default (the external network has no route to podCIDRs).
	if err := l.in(ctx, node.NS,
		fmt.Sprintf("iptables -w -t nat -A POSTROUTING -s %s ! -d %s -o eth0 -j MASQUERADE", ClusterCIDRv4, ClusterCIDRv4),
		fmt.Sprintf("ip6tables -w -t nat -A POSTROUTING -s %s ! -d %s -o eth0 -j MASQUERADE", ClusterCIDRv6, ClusterCIDRv6),
	); err != nil {
		return err
	}
	l.Nodes = append(l.Nodes, node)
	return nil
}

// plug connects namespace ns to the fabric bridge with eth0 holding the given addresses.
func (l *Lab) plug(ctx context.Context, ns, fabricSide string, v4, v6 netip.Addr) error {
	if err := l.in(ctx, l.fabricNS,
		fmt.Sprintf("ip link add %s type veth peer name eth0 netns %s", fabricSide, ns),
		fmt.Sprintf("ip link set %s master br0 up", fabricSide),
	); err != nil {
		return err
	}
	return l.in(ctx, ns,
		"sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0",
		"ip link set lo up",
		fmt.Sprintf("ip addr add %s/24 dev eth0", v4),
		fmt.Sprintf("ip addr add %s/64 dev eth0 nodad", v6),
		"ip link set eth0 up",
	)
}

func (l *Lab) routeToOtherNodes(ctx context.Context, node *Node) error {
	var cmds []string
	for _, other := range l.Nodes {
		if other == node {
			continue
		}
		cmds = append(cmds,
			fmt.Sprintf("ip route add %s via %s src %s", other.PodCIDRv4, other.TransportV4, node.GatewayV4),
			fmt.Sprintf("ip -6 route add %s via %s src %s", other.PodCIDRv6, other.TransportV6, node.GatewayV6),
		)
	}
	return l.in(ctx, node.NS, cmds...)
}

// AddPod creates a Pod namespace on node, routed from the Node.
func (l *Lab) AddPod(ctx context.Context, node *Node, namespace, name string) (*Pod, error) {
	j := len(node.Pods) + 1
	if j > 200 {
		return nil, fmt.Errorf("netlab: too many Pods on %s", node.Name)
	}
	pod := &Pod{
		Namespace: namespace, Name: name, Node: node,
		NS:       fmt.Sprintf("%s%s-n%dp%d", Prefix, l.run, node.Index, j),
		IPv4:     netip.MustParseAddr(fmt.Sprintf("10.244.%d.%d", node.Index, 10+j)),
		IPv6:     netip.MustParseAddr(fmt.Sprintf("fd00:244:0:%d::%x", node.Index, 10+j)),
		hostVeth: fmt.Sprintf("veth%d", j),
	}
	if err := l.addNS(ctx, pod.NS); err != nil {
		return nil, err
	}
	if err := l.in(ctx, node.NS,
		fmt.Sprintf("ip link add %s type veth peer name eth0 netns %s", pod.hostVeth, pod.NS),
		fmt.Sprintf("ip addr add fe80::1/64 dev %s nodad", pod.hostVeth),
		fmt.Sprintf("ip link set %s up", pod.hostVeth),
		fmt.Sprintf("ip route add %s/32 dev %s src %s", pod.IPv4, pod.hostVeth, node.GatewayV4),
		fmt.Sprintf("ip -6 route add %s/128 dev %s src %s", pod.IPv6, pod.hostVeth, node.GatewayV6),
	); err != nil {
		return nil, err
	}
	if err := l.in(ctx, pod.NS,
		"sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0",
		"ip link set lo up",
		// Host routes only (/32, /128): every packet, also to a Pod on the same
		// Node, goes through the Node, as with routed CNIs.
		fmt.Sprintf("ip addr add %s/32 dev eth0", pod.IPv4),
		fmt.Sprintf("ip addr add %s/128 dev eth0 nodad", pod.IPv6),
		"ip link set eth0 up",
		fmt.Sprintf("ip route add %s dev eth0 scope link", node.GatewayV4),
		fmt.Sprintf("ip route replace default via %s dev eth0", node.GatewayV4),
		"ip -6 route replace default via fe80::1 dev eth0",
	); err != nil {
		return nil, err
	}
	node.Pods = append(node.Pods, pod)
	return pod, nil
}

// Exec runs a command in a namespace and returns its combined output.
func Exec(ctx context.Context, ns string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("in %s: %s: %w: %s", ns, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Command returns an unstarted command that runs in namespace ns.
func Command(ctx context.Context, ns string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
}

// in runs shell-free commands (split on spaces) in namespace ns, stopping at the first error.
func (l *Lab) in(ctx context.Context, ns string, cmds ...string) error {
	for _, c := range cmds {
		if _, err := Exec(ctx, ns, strings.Fields(c)...); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) addNS(ctx context.Context, ns string) error {
	out, err := exec.CommandContext(ctx, "ip", "netns", "add", ns).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip netns add %s: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	l.created = append(l.created, ns)
	return nil
}

// NetNSPath is the path of a namespace, for the conntrack receiver's netns option.
func NetNSPath(ns string) string { return "/var/run/netns/" + ns }

// Close deletes every namespace the lab created; deleting a namespace removes
// its interfaces, routes, iptables rules and conntrack table with it.
func (l *Lab) Close() error {
	var errs []string
	for i := len(l.created) - 1; i >= 0; i-- {
		if out, err := exec.Command("ip", "netns", "delete", l.created[i]).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %s", l.created[i], strings.TrimSpace(string(out))))
		}
	}
	l.created = nil
	if len(errs) > 0 {
		return fmt.Errorf("netlab: close: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Cleanup removes the leftovers of runs that crashed before they could close
// their labs: every namespace starting with Prefix whose creating process is gone.
// Labs of live processes (tests of other packages running in parallel) are kept.
func Cleanup() error {
	entries, err := os.ReadDir("/var/run/netns")
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) && !ownerAlive(e.Name()) {
			if out, err := exec.Command("ip", "netns", "delete", e.Name()).CombinedOutput(); err != nil {
				return fmt.Errorf("netlab: delete %s: %w: %s", e.Name(), err, out)
			}
		}
	}
	return nil
}

var labsInProcess atomic.Int32

// RunID returns an id for a new lab's namespace names: the process ID (so
// Cleanup can tell live labs from leftovers) and a per-process counter.
func RunID() string { return fmt.Sprintf("%dx%d", os.Getpid(), labsInProcess.Add(1)) }

// ownerAlive reports whether the process that created namespace ns still runs.
func ownerAlive(ns string) bool {
	id := strings.TrimPrefix(ns, Prefix)
	pid, _, ok := strings.Cut(id, "x")
	if !ok {
		return false
	}
	if _, err := strconv.Atoi(pid); err != nil {
		return false
	}
	_, err := os.Stat("/proc/" + pid)
	return err == nil
}
