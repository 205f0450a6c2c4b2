//go:build integration

package netlab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/flowtel/flowtel/testbed/peer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireRoot skips when not root: creating namespaces needs it. CI runs as root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netlab needs root (network namespaces); CI runs as root")
	}
	for _, tool := range []string{"ip", "iptables", "ip6tables", "conntrack"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (make deps)", tool)
		}
	}
}

func newLab(t *testing.T, nodes int) *Lab {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lab, err := New(ctx, RunID(), nodes)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, lab.Close()) })
	return lab
}

func conntrackList(t *testing.T, ns string) string {
	t.Helper()
	out, err := Exec(context.Background(), ns, "conntrack", "-L", "-o", "extended")
	require.NoError(t, err, out)
	return out
}

// The topology carries Pod-to-Pod, host-to-Pod (from the gateway address: the
// Antrea #8260 condition), ClusterIP and NodePort traffic, in both families, and
// the Nodes' conntrack tables see it as a real cluster's would.
func TestLabCarriesClusterTraffic(t *testing.T) {
	requireRoot(t)
	bin := peer.Build(t)
	lab := newLab(t, 2)
	ctx := context.Background()
	n1, n2 := lab.Nodes[0], lab.Nodes[1]
	client, err := lab.AddPod(ctx, n1, "default", "client")
	require.NoError(t, err)
	server, err := lab.AddPod(ctx, n2, "default", "server")
	require.NoError(t, err)
	peer.Serve(t, bin, server.NS, 700)
	svc := &Service{Namespace: "default", Name: "web", Protocol: "tcp", Port: 80, TargetPort: 8080, NodePort: 30080,
		ClusterIPv4: netip.MustParseAddr("10.96.0.10"), ClusterIPv6: netip.MustParseAddr("fd00:10:96::10"),
		Endpoints: []*Pod{server}}
	require.NoError(t, lab.AddService(ctx, svc))

	send := func(ns string, proto string, to netip.AddrPort, sport int) {
		t.Helper()
		out, err := Exec(ctx, ns, bin, "send", "-proto", proto, "-to", to.String(), "-bytes", "3000", "-sport", fmt.Sprint(sport))
		require.NoError(t, err, out)
		want := "received 700"
		assert.Contains(t, out, want)
	}
	send(client.NS, "tcp", netip.AddrPortFrom(server.IPv4, 8080), 41001)           // Pod → remote Pod
	send(client.NS, "tcp", netip.AddrPortFrom(server.IPv6, 8080), 41002)           // same, IPv6
	send(client.NS, "udp", netip.AddrPortFrom(server.IPv4, 8080), 41003)           // UDP
	send(client.NS, "tcp", netip.AddrPortFrom(svc.ClusterIPv4, 80), 41004)         // Pod → ClusterIP
	send(n1.NS, "tcp", netip.AddrPortFrom(server.IPv4, 8080), 41005)               // host → remote Pod
	send(n1.NS, "tcp", netip.AddrPortFrom(svc.ClusterIPv6, 80), 41006)             // host → ClusterIP (v6)
	send(lab.External.NS, "tcp", netip.AddrPortFrom(n1.TransportV4, 30080), 41007) // external → NodePort on the other Node

	ct1, ct2 := conntrackList(t, n1.NS), conntrackList(t, n2.NS)
	// host → remote Pod leaves from the local gateway address (Antrea issue #8260).
	assert.Contains(t, ct1, fmt.Sprintf("src=%s dst=%s sport=41005 dport=8080", n1.GatewayV4, server.IPv4))
	assert.Contains(t, ct2, fmt.Sprintf("src=%s dst=%s sport=41005 dport=8080", n1.GatewayV4, server.IPv4))
	// Pod → ClusterIP is DNATed on the source Node; the destination Node sees the Pod tuple.
	assert.Contains(t, ct1, fmt.Sprintf("src=%s dst=%s sport=41004 dport=80 ", client.IPv4, svc.ClusterIPv4))
	assert.Contains(t, ct2, fmt.Sprintf("src=%s dst=%s sport=41004 dport=8080", client.IPv4, server.IPv4))
	// host → ClusterIP (v6) from the gateway address.
	assert.Contains(t, ct1, fmt.Sprintf("src=%s dst=%s sport=41006 dport=80 ", n1.GatewayV6, svc.ClusterIPv6))
	// external → NodePort: the ingress Node masquerades; the destination Node sees the SNAT address.
	assert.Contains(t, ct1, fmt.Sprintf("src=%s dst=%s sport=41007 dport=30080", lab.External.IPv4, n1.TransportV4))
	assert.Regexp(t, fmt.Sprintf(`src=%s dst=%s sport=\d+ dport=8080`, n1.TransportV4, server.IPv4), ct2)
	// counters are on (nf_conntrack_acct).
	assert.Contains(t, ct1, "bytes=")
}

// Closing the lab removes every namespace; Cleanup removes a crashed run's leftovers.
func TestLabCleanup(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	lab, err := New(ctx, RunID(), 1)
	require.NoError(t, err)
	_, err = lab.AddPod(ctx, lab.Nodes[0], "default", "p")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lab.Close() })

	// A live lab survives Cleanup.
	require.NoError(t, Cleanup())
	for _, ns := range lab.created {
		_, err := os.Stat(NetNSPath(ns))
		assert.NoError(t, err, "Cleanup removed %s of a live process", ns)
	}

	// A crashed run's namespace (its process is gone) is removed.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	leftover := fmt.Sprintf("%s%dx1-node1", Prefix, dead.Process.Pid)
	require.NoError(t, exec.Command("ip", "netns", "add", leftover).Run())
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", leftover).Run() })
	require.NoError(t, Cleanup())
	_, err = os.Stat(NetNSPath(leftover))
	assert.True(t, os.IsNotExist(err), "leftover %s still exists", leftover)

	// Close removes the lab's own namespaces.
	names := append([]string(nil), lab.created...)
	require.NoError(t, lab.Close())
	for _, ns := range names {
		_, err := os.Stat(NetNSPath(ns))
		assert.True(t, os.IsNotExist(err), "%s still exists after Close", ns)
	}
}
