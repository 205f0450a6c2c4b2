package kube

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/testbed/controlplane"
	"github.com/flowtel/flowtel/testbed/kube/images"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// Node is one kubelet's machine: a network namespace on the fabric and a mount
// namespace in which per-Node directories cover the paths a kubelet,
// containerd and the workloads' hostPath volumes use, so two Nodes on one
// host never share a file.
type Node struct {
	Name    string
	NS      string // network namespace name
	Addr    netip.Addr
	PodCIDR netip.Prefix // from the controller manager, once registered
	// Dir holds the Node's directories and its daemons' logs.
	Dir string

	holder     *exec.Cmd // holds the mount namespace: every daemon joins it
	cgroupRoot string    // the kubelet's cgroupRoot, and the daemons' cgroup beneath it
}

// nodePaths are the host paths each Node gets its own copy of (bind mounts in
// its mount namespace): the kubelet's and containerd's state, the CNI plugins'
// configuration and IP allocations, Pod logs, Pod network namespaces, and the
// hostPath flowtel's node collector keeps its checkpoint and queue in.
var nodePaths = []string{
	"/var/lib/kubelet", "/var/lib/containerd", "/run/containerd", "/var/lib/cni", "/etc/cni/net.d",
	"/var/log/pods", "/var/log/containers", "/run/netns", "/var/lib/flowtel",
}

// kubeletTunables are the kernel settings the kubelet insists on
// (pkg/kubelet/cm: setupKernelTunables), by their /proc/sys paths.
var kubeletTunables = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// cgroupPrefix starts every cgroup a Node creates, so that leftovers of a
// crashed run can be found (cleanupLeftovers).
const cgroupPrefix = "flowtel-bed-"

func (c *Cluster) startNode(t testing.TB, i int) *Node {
	t.Helper()
	n := &Node{
		Name:       fmt.Sprintf("node-%d", i),
		NS:         fmt.Sprintf("%s%s-knode%d", netlab.Prefix, c.run, i),
		Addr:       netip.MustParseAddr(fmt.Sprintf("192.168.77.%d", 10+i)),
		Dir:        filepath.Join(c.Dir, fmt.Sprintf("node-%d", i)),
		cgroupRoot: fmt.Sprintf("%s%s-node%d", cgroupPrefix, c.run, i),
	}
	c.plug(t, n.NS, fmt.Sprintf("n%d", i), n.Addr)
	c.in(t, n.NS, "sysctl -qw net.ipv4.ip_forward=1",
		// The external host is the Nodes' router (a default route is also what
		// lets a hostNetwork process route a ClusterIP before kube-proxy's DNAT).
		fmt.Sprintf("ip route add default via %s", ExternalAddr),
		// The bridge's traffic crosses iptables, so Service replies between two
		// Pods on one bridge are un-NATed (what kubeadm asks of a Node).
		"sysctl -qw net.bridge.bridge-nf-call-iptables=1")
	for _, p := range nodePaths {
		must(t, os.MkdirAll(filepath.Join(n.Dir, "root", p), 0o755))
		must(t, os.MkdirAll(p, 0o755)) // the mount point on the host
	}

	// The holder's mount namespace is a copy of the host's; mounts made in
	// it do not leak out (slave propagation). Not `ip netns exec`: it remounts
	// /sys, which hides the cgroup hierarchies from the kubelet.
	t.Cleanup(func() { n.teardown(t) })
	n.holder = exec.Command("nsenter", "--net="+netlab.NetNSPath(n.NS), "--",
		"unshare", "--mount", "--propagation", "slave", "--", "sleep", "infinity")
	n.holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(t, n.holder.Start())
	go func() { _ = n.holder.Wait() }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		self, _ := os.Readlink("/proc/self/ns/mnt")
		other, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.holder.Process.Pid))
		if other != "" && other != self {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube: %s's mount namespace did not appear", n.Name)
		}
	}
	for _, p := range nodePaths {
		n.exec(t, "mount", "--bind", filepath.Join(n.Dir, "root", p), p)
	}
	// Pod volumes the kubelet mounts must reach the containers it starts.
	n.exec(t, "mount", "--make-rshared", "/var/lib/kubelet")
	// The kubelet sets host-wide kernel tunables (kernel.panic=10,
	// vm.overcommit_memory=1, …) it finds different. Not on a shared test
	// machine: in the Node's mount namespace each reads as the kubelet wants.
	for key, want := range kubeletTunables {
		path := filepath.Join("/proc/sys", key)
		if cur, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(cur)) == want {
			continue
		}
		n.exec(t, "mount", "--bind", n.write(t, "sysctl-"+strings.ReplaceAll(key, "/", "-"), want+"\n"), path)
	}
	n.makeCgroup(t)

	n.startContainerd(t)
	must(t, n.Import(context.Background(), c.opts.Images...))
	n.startKubelet(t, c)
	n.startKubeProxy(t, c)
	return n
}

// exec runs a command in the Node's namespaces.
func (n *Node) exec(t testing.TB, args ...string) string {
	t.Helper()
	out, err := n.Command(context.Background(), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kube: on %s: %s: %v: %s", n.Name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Command returns a command that runs in the Node's network and mount namespaces.
func (n *Node) Command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(n.holder.Process.Pid), "-m", "-n", "--"}, args...)...)
}

// start runs a daemon in the Node's namespaces and its cgroup, with its log in Dir.
func (n *Node) start(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := controlplane.StartProcess(t, n.Dir, name, "nsenter",
		append([]string{"-t", strconv.Itoa(n.holder.Process.Pid), "-m", "-n", "--"}, args...)...)
	n.joinCgroup(t, cmd.Process.Pid)
}

// cgroupHierarchies lists this host's cgroup v1 hierarchies (the directories
// under /sys/fs/cgroup but the cgroup2 "unified" one): the kubelet wants its
// cgroupRoot in each.
func cgroupHierarchies() []string {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var hs []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "unified" {
			hs = append(hs, e.Name())
		}
	}
	return hs
}

// makeCgroup creates the Node's cgroupRoot and its daemons cgroup beneath:
// containerd and the shims it forks live there, so teardown finds every
// process the Node left.
func (n *Node) makeCgroup(t testing.TB) {
	t.Helper()
	for _, h := range cgroupHierarchies() {
		for _, dir := range []string{n.cgroupRoot, filepath.Join(n.cgroupRoot, "daemons")} {
			path := filepath.Join("/sys/fs/cgroup", h, dir)
			must(t, os.MkdirAll(path, 0o755))
			if h == "cpuset" {
				// A new cpuset holds no task until it has CPUs and memory nodes.
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(filepath.Dir(path), f))
					must(t, err)
					must(t, os.WriteFile(filepath.Join(path, f), v, 0o644))
				}
			}
		}
	}
}

func (n *Node) joinCgroup(t testing.TB, pid int) {
	t.Helper()
	for _, h := range cgroupHierarchies() {
		must(t, os.WriteFile(filepath.Join("/sys/fs/cgroup", h, n.cgroupRoot, "daemons", "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644))
	}
}

func (n *Node) write(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(n.Dir, name)
	must(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// SandboxImage is the pause image containerd starts every Pod's sandbox
// from; the cluster's user imports it (see Import) before Pods run.
var SandboxImage = "registry.k8s.io/pause:3.10"

func (n *Node) startContainerd(t testing.TB) {
	t.Helper()
	// restrict_oom_score_adj: containerd would give sandboxes -998, which
	// runc cannot set without CAP_SYS_RESOURCE (not in this machine's
	// bounding set); every sandbox would fail with a bare "can't get final
	// child's PID from pipe: EOF".
	cfg := n.write(t, "containerd.toml", fmt.Sprintf(`version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
`, SandboxImage))
	n.start(t, "containerd", "containerd", "--config", cfg)
	sock := filepath.Join(n.Dir, "root", "/run/containerd", "containerd.sock")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube: containerd on %s did not start; log tail:\n%s", n.Name, tail(filepath.Join(n.Dir, "containerd.log")))
		}
	}
}

// Import loads docker-archive image tarballs into the Node's containerd, where
// the kubelet finds them (the k8s.io namespace).
func (n *Node) Import(ctx context.Context, tarballs ...string) error {
	if err := images.Import(ctx, filepath.Join(n.Dir, "root", "/run/containerd", "containerd.sock"), tarballs...); err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	return nil
}

func (n *Node) startKubelet(t testing.TB, c *Cluster) {
	t.Helper()
	kc := c.certKubeconfig(t, "kubelet-"+n.Name, "system:node:"+n.Name, "system:nodes")
	resolv := n.write(t, "resolv.conf", "nameserver "+DNSAddr.String()+"\n")
	cfg := n.write(t, "kubelet.yaml", fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host: cgroup v1, no systemd, no CAP_SYS_RESOURCE (oomScoreAdj 0), swap allowed.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
oomScoreAdj: 0
failSwapOn: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: %s
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization: {mode: AlwaysAllow}
clusterDNS: [%s]
clusterDomain: cluster.local
resolvConf: %s
# Small shared disks: never evict or collect images for space.
evictionHard: {memory.available: "1Mi", nodefs.available: "0%%", nodefs.inodesFree: "0%%", imagefs.available: "0%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`, n.cgroupRoot, n.Addr, c.ServingCA, DNSAddr, resolv))
	n.start(t, "kubelet", filepath.Join(c.Bin, "kubelet"), "--config="+cfg, "--kubeconfig="+kc,
		"--hostname-override="+n.Name, "--node-ip="+n.Addr.String(), "--v=1")
}

func (n *Node) startKubeProxy(t testing.TB, c *Cluster) {
	t.Helper()
	kc := c.certKubeconfig(t, "kube-proxy-"+n.Name, "system:kube-proxy")
	// conntrack: 0 everywhere, so kube-proxy writes no host-wide sysctl
	// (nf_conntrack_max is global).
	cfg := n.write(t, "kube-proxy.yaml", fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: %s
clusterCIDR: %s
hostnameOverride: %s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, kc, c.opts.ProxyMode, ClusterCIDR, n.Name))
	n.start(t, "kube-proxy", filepath.Join(c.Bin, "kube-proxy"), "--config="+cfg, "--v=1")
}

// configureCNI waits for the Node's podCIDR and writes its CNI
// configuration: a bridge whose address is the podCIDR's gateway, host-local
// addresses from the podCIDR, portmap for hostPorts. The kubelet reports the
// Node Ready once containerd has read it.
func (n *Node) configureCNI(t testing.TB, c *Cluster) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		node, err := c.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil && node.Spec.PodCIDR != "" {
			n.PodCIDR = netip.MustParsePrefix(node.Spec.PodCIDR)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube: Node %s has no podCIDR after 2 min (err %v); kubelet log tail:\n%s", n.Name, err, tail(filepath.Join(n.Dir, "kubelet.log")))
		}
		time.Sleep(300 * time.Millisecond)
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "bed",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "hairpinMode": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.PodCIDR)
	must(t, os.WriteFile(filepath.Join(n.Dir, "root", "/etc/cni/net.d", "10-bed.conflist"), []byte(conf), 0o644))
}

// teardown kills every process the Node left (Pods' containers, containerd's
// shims, which outlive containerd) and removes its cgroups; its namespaces
// go with their last process.
func (n *Node) teardown(t testing.TB) {
	if n.holder != nil && n.holder.Process != nil {
		mnt, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.holder.Process.Pid))
		killCgroupTree(n.cgroupRoot)
		if mnt != "" {
			killMountNS(mnt)
		}
		_ = n.holder.Process.Kill()
	}
	if err := removeCgroupTree(n.cgroupRoot); err != nil {
		t.Logf("kube: %v", err)
	}
}

// killCgroupTree SIGKILLs every process in the pids hierarchy below root.
func killCgroupTree(root string) {
	for range 10 {
		var pids []int
		_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "cgroup.procs" {
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids = append(pids, pid)
					}
				}
			}
			return nil
		})
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killMountNS SIGKILLs every process in mount namespace mnt (as readlink shows it).
func killMountNS(mnt string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); l == mnt {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// removeCgroupTree removes root and every cgroup below it in every hierarchy,
// deepest first, retrying while the last processes exit.
func removeCgroupTree(root string) error {
	hierarchies, _ := os.ReadDir("/sys/fs/cgroup")
	var last error
	for _, h := range hierarchies {
		base := filepath.Join("/sys/fs/cgroup", h.Name(), root)
		var dirs []string
		_ = filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			for try := 0; ; try++ {
				err := os.Remove(d)
				if err == nil || os.IsNotExist(err) {
					break
				}
				if try == 50 {
					last = fmt.Errorf("removing cgroup %s: %w", d, err)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return last
}

// cleanupLeftovers removes what Nodes of crashed runs left: their processes
// and cgroups (their network namespaces are netlab.Cleanup's).
func cleanupLeftovers() {
	entries, _ := os.ReadDir("/sys/fs/cgroup/pids")
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(name, "x", 2)[0])
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == nil {
			continue // a live run's
		}
		killCgroupTree(e.Name())
		_ = removeCgroupTree(e.Name())
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
