// Package kube runs a real Kubernetes cluster for flowtel's tests: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and CoreDNS in a
// control-plane network namespace, and Nodes that each run containerd, a
// kubelet and kube-proxy in their own network and mount namespaces, with the
// bridge CNI plugin. Nothing runs in the test's own network namespace; the
// test reaches the cluster through sockets it opens inside the namespaces
// (Dialer, Relay), and kubectl and helm run inside the control plane's.
//
// Layout (IPv4; the namespaces are netlab's, so netlab.Cleanup removes leftovers):
//
//	fabric:        bridge br0 joining every other namespace's eth0
//	control plane: 192.168.77.2   API server :6443, CoreDNS :53 (the kube-dns Service's endpoint)
//	Node i:        192.168.77.(10+i), its podCIDR (from the controller manager) on bridge cni0
//	external:      192.168.77.100  a host outside the cluster
//
// What this machine needs of a kubelet (no systemd, a cgroup v1 host, no
// CAP_SYS_RESOURCE, containerd 1.6) is set in node.go, each with its reason.
package kube

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flowtel/flowtel/testbed/controlplane"
	"github.com/flowtel/flowtel/testbed/netlab"
	"github.com/flowtel/flowtel/testbed/proc"
)

// Addresses of the cluster's fabric.
var (
	ControlPlaneAddr = netip.MustParseAddr("192.168.77.2")
	ExternalAddr     = netip.MustParseAddr("192.168.77.100")
	ClusterCIDR      = netip.MustParsePrefix("10.244.0.0/16")
	// DNSAddr is the kube-dns Service's ClusterIP, the kubelets' clusterDNS.
	DNSAddr = netip.MustParseAddr("10.96.0.10")
)

// Options chooses how the cluster is built.
type Options struct {
	// Nodes is the number of Nodes (default 2).
	Nodes int
	// ProxyMode is kube-proxy's mode: "iptables" (default) or "nftables".
	ProxyMode string
	// Images are docker-archive tarballs imported into every Node before its
	// kubelet starts; one must be SandboxImage.
	Images []string
}

// Cluster is a running cluster; everything stops and is removed when the test ends.
type Cluster struct {
	*controlplane.ControlPlane
	// Nodes in order node-1, node-2, …
	Nodes []*Node
	// ExternalNS is the network namespace of a host outside the cluster.
	ExternalNS string
	// Kubeconfig is an administrator's kubeconfig (kubectl, helm).
	Kubeconfig string
	// Bin holds kubectl and the other Kubernetes binaries.
	Bin string

	run, fabricNS, cpNS string
	opts                Options
}

// built is build.sh, run at the first Binaries call.
var built proc.BuildScript

// Binaries returns the directory holding kubelet, kube-proxy,
// kube-controller-manager, kube-scheduler, kubectl and coredns, building them
// with build.sh on first use (minutes when the cache is cold; `scripts/peers.sh`
// builds them ahead of the tests).
func Binaries() (string, error) {
	_, self, _, _ := runtime.Caller(0)
	return built.Dir(self, "the Kubernetes node components")
}

// Start builds the cluster and waits until every Node is Ready and DNS answers.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.ProxyMode == "" {
		o.ProxyMode = "iptables"
	}
	bin, err := Binaries()
	if err != nil {
		t.Fatal(err)
	}
	_ = netlab.Cleanup()
	cleanupLeftovers()
	run := netlab.RunID()
	c := &Cluster{Bin: bin, run: run, opts: o,
		fabricNS: netlab.Prefix + run + "-kfabric", cpNS: netlab.Prefix + run + "-kcp",
		ExternalNS: netlab.Prefix + run + "-kext"}
	ctx := context.Background()
	c.addNS(t, c.fabricNS)
	c.in(t, c.fabricNS, "ip link add br0 type bridge", "ip link set br0 up")
	c.plug(t, c.cpNS, "cp", ControlPlaneAddr)
	c.plug(t, c.ExternalNS, "ext", ExternalAddr)

	t.Log("kube: control plane (etcd, kube-apiserver, controller manager, scheduler, CoreDNS)")
	c.ControlPlane = controlplane.StartWith(t, controlplane.Options{
		NetNS: netlab.NetNSPath(c.cpNS), Address: ControlPlaneAddr.String(), Dial: Dialer(netlab.NetNSPath(c.cpNS)),
	})
	c.Kubeconfig = c.certKubeconfig(t, "admin", "kubernetes-admin", "system:masters")
	c.startControllers(t)
	c.startDNS(t, ctx)

	for i := 1; i <= o.Nodes; i++ {
		c.Nodes = append(c.Nodes, c.startNode(t, i))
	}
	for _, n := range c.Nodes {
		n.configureCNI(t, c)
	}
	c.waitNodesReady(t)
	return c
}

// addNS creates a network namespace that is deleted when the test ends.
func (c *Cluster) addNS(t testing.TB, ns string) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
}

// in runs commands (split on spaces) in network namespace ns.
func (c *Cluster) in(t testing.TB, ns string, cmds ...string) {
	t.Helper()
	for _, cmd := range cmds {
		if out, err := netlab.Exec(context.Background(), ns, strings.Fields(cmd)...); err != nil {
			t.Fatalf("in %s: %s: %v: %s", ns, cmd, err, out)
		}
	}
}

// plug creates namespace ns joined to the fabric with addr on its eth0.
func (c *Cluster) plug(t testing.TB, ns, fabricSide string, addr netip.Addr) {
	t.Helper()
	c.addNS(t, ns)
	c.in(t, c.fabricNS,
		fmt.Sprintf("ip link add %s type veth peer name eth0 netns %s", fabricSide, ns),
		fmt.Sprintf("ip link set %s master br0 up", fabricSide))
	c.in(t, ns, "ip link set lo up", fmt.Sprintf("ip addr add %s/24 dev eth0", addr), "ip link set eth0 up")
}

// certKubeconfig writes a kubeconfig authenticating as user (in groups) with a
// client certificate, verifying the API server's certificate.
func (c *Cluster) certKubeconfig(t testing.TB, name, user string, groups ...string) string {
	t.Helper()
	cert, key := c.WriteClientCertificate(t, user, groups...)
	path := filepath.Join(c.Dir, name+".kubeconfig")
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: bed, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: %s, user: {client-certificate: %q, client-key: %q}}]
contexts: [{name: bed, context: {cluster: bed, user: %s}}]
current-context: bed
`, c.URL, c.ServingCA, name, cert, key, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startControllers runs kube-controller-manager (ServiceAccounts, workload
// controllers, EndpointSlices, Node podCIDRs) and kube-scheduler.
func (c *Cluster) startControllers(t testing.TB) {
	t.Helper()
	kcm := c.certKubeconfig(t, "controller-manager", "system:kube-controller-manager")
	c.Start(t, "kube-controller-manager", filepath.Join(c.Bin, "kube-controller-manager"),
		"--kubeconfig="+kcm, "--authentication-kubeconfig="+kcm, "--authorization-kubeconfig="+kcm,
		"--bind-address=127.0.0.1", "--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.ServiceAccountKey, "--root-ca-file="+c.ServingCA,
		"--allocate-node-cidrs=true", "--cluster-cidr="+ClusterCIDR.String(), "--node-cidr-mask-size=24",
		"--service-cluster-ip-range="+controlplane.ServiceCIDRv4,
		// The bed's Nodes come and go with the test: no eviction wait.
		"--node-monitor-grace-period=20s")
	sched := c.certKubeconfig(t, "scheduler", "system:kube-scheduler")
	c.Start(t, "kube-scheduler", filepath.Join(c.Bin, "kube-scheduler"),
		"--kubeconfig="+sched, "--authentication-kubeconfig="+sched, "--authorization-kubeconfig="+sched,
		"--bind-address=127.0.0.1", "--leader-elect=false")
}

// startDNS runs CoreDNS in the control plane's namespace, serving
// cluster.local from the API server, behind the kube-dns Service (no selector:
// its EndpointSlice names the control plane's address).
func (c *Cluster) startDNS(t testing.TB, ctx context.Context) {
	t.Helper()
	kc := c.certKubeconfig(t, "coredns", "system:coredns-bed", "system:masters")
	corefile := filepath.Join(c.Dir, "Corefile")
	conf := fmt.Sprintf(`.:53 {
    bind %s
    errors
    health 127.0.0.1:8080
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s bed
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
`, ControlPlaneAddr, kc)
	if err := os.WriteFile(corefile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Start(t, "coredns", filepath.Join(c.Bin, "coredns"), "-conf", corefile)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{ClusterIP: DNSAddr.String(), Ports: []corev1.ServicePort{
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(53)},
		}},
	}
	if _, err := c.Admin.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := true
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dns, dnsTCP, port := "dns", "dns-tcp", int32(53)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-bed", Namespace: "kube-system", Labels: map[string]string{
			discoveryv1.LabelServiceName: "kube-dns", discoveryv1.LabelManagedBy: "flowtel-testbed"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ControlPlaneAddr.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &dns, Protocol: &udp, Port: &port}, {Name: &dnsTCP, Protocol: &tcp, Port: &port}},
	}
	if _, err := c.Admin.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitNodesReady waits until every Node is Ready, then routes each Node's
// podCIDR from the other Nodes and from the control plane (the bridge CNI
// routes nothing between Nodes; a cloud's routes or an overlay would).
func (c *Cluster) waitNodesReady(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(3 * time.Minute)
	for _, n := range c.Nodes {
		for {
			node, err := c.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err == nil && isReady(node) {
				break
			}
			if err != nil && !apierrors.IsNotFound(err) {
				t.Logf("kube: reading Node %s: %v", n.Name, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("kube: Node %s not Ready after 3 min; kubelet log tail:\n%s", n.Name, tail(filepath.Join(n.Dir, "kubelet.log")))
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	for _, n := range c.Nodes {
		for _, other := range c.Nodes {
			if other != n {
				c.in(t, n.NS, fmt.Sprintf("ip route replace %s via %s", other.PodCIDR, other.Addr))
			}
		}
		c.in(t, c.cpNS, fmt.Sprintf("ip route replace %s via %s", n.PodCIDR, n.Addr))
	}
}

func isReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tail returns the last 4 kB of a log file.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Kubectl runs kubectl as the cluster's administrator, in the control plane's
// network namespace, and returns its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return c.Run(ctx, filepath.Join(c.Bin, "kubectl"), append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
}

// Run runs a program (helm, kubectl, a script) in the control plane's network
// namespace with KUBECONFIG set to the administrator's and the cluster's
// kubectl first on PATH, and returns its combined output.
func (c *Cluster) Run(ctx context.Context, path string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + netlab.NetNSPath(c.cpNS), "--", path}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PATH="+c.Bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", filepath.Base(path), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// ControlPlaneNS is the network namespace of the control plane (for Relay and Dialer).
func (c *Cluster) ControlPlaneNS() string { return netlab.NetNSPath(c.cpNS) }
