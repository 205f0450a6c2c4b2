//go:build integration

package e2ekube

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/testbed/kube"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// testTimers shorten what the shipped configuration waits (60 s active, 90 s
// inactive) so rows come within seconds; nothing else differs from defaults.
var testTimers = []string{
	"--set", "node.conntrack.poll_interval=1s",
	"--set", "node.conntrack.active_timeout=2s",
	"--set", "node.conntrack.idle_timeout=1s",
	"--set", "gateway.flowCorrelation.active_timeout=3s",
	"--set", "gateway.flowCorrelation.inactive_timeout=6s",
}

// installFlowtel installs the chart as a user would, with the ClickHouse sink
// on, and waits for every Pod to be Ready.
func (b *bed) installFlowtel(t *testing.T, release, namespace string, extra ...string) {
	t.Helper()
	start := time.Now()
	args := append([]string{"install", release, b.chart, "-n", namespace, "--create-namespace", "--wait", "--timeout", "4m",
		"--set", "sinks.clickhouse.enabled=true",
		"--set", "sinks.clickhouse.endpoint=tcp://" + clickhouseAddr,
		"--set", "sinks.clickhouse.database=" + database}, testTimers...)
	b.helmRun(t, append(args, extra...)...)
	t.Logf("bed: helm install %s --wait: %s", release, time.Since(start).Round(time.Second))
}

// workloads are the scenario's Pods: servers on both Nodes, a client on each,
// a hostNetwork client on node-1, and Services in front of web-2.
var workloads = `
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web-2}
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: web-np, namespace: shop}
spec:
  type: NodePort
  selector: {app: web-2}
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080, protocol: TCP}]
` + deployments

var deployments = deployment("web-1", "node-1", false, "8080") + deployment("web-2", "node-2", false, "8080") +
	deployment("client-1", "node-1", false, "9000") + deployment("client-2", "node-2", false, "9000") +
	deployment("hostclient", "node-1", true, "9099")

func deployment(name, node string, hostNetwork bool, port string) string {
	return fmt.Sprintf(`---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      nodeSelector: {kubernetes.io/hostname: %[2]s}
      hostNetwork: %[3]v
      terminationGracePeriodSeconds: 1
      containers:
        - name: peer
          image: %[4]s
          args: [serve, -listen, "0.0.0.0:%[5]s", -reply, "%[6]d"]
          readinessProbe: {tcpSocket: {port: %[5]s}, periodSeconds: 1}
`, name, node, hostNetwork, kube.PeerImage, port, replyBytes)
}

// Every connection sends requestBytes and gets replyBytes back.
const (
	requestBytes = 3000
	replyBytes   = 2000
)

// kcase is one connection the scenario makes and what its row must say.
type kcase struct {
	name  string
	from  string // "deploy/<name>" (kubectl exec) or "external"
	to    func(*world) string
	proto string
	// sport is the client's fixed source port, by which the case's rows are
	// found: below the ephemeral range (32768-60999), so no connection the
	// kernel numbers itself (kubelet probes, DNS lookups) shares it.
	sport uint16
	want  expect
}

// expect is the row's identity; "" and 0 are not checked.
type expect struct {
	flowType                 uint8
	srcPod, srcNode, srcKind string
	dstPod, dstNode, dstKind string
	service, correlation     string
	srcIsClient              bool
}

// world is what the scenario learns from the API: Pod names and addresses,
// Service addresses.
type world struct {
	pods      map[string]podInfo // by Deployment
	clusterIP string
	nodeAddr  map[string]string
}

type podInfo struct{ name, ip, node string }

// startWorkloads applies the scenario's workloads and waits until every Pod
// is reachable, through its Services too, from every Node.
func (b *bed) startWorkloads(t *testing.T) *world {
	t.Helper()
	b.apply(t, workloads)
	b.kubectl(t, "wait", "-n", "shop", "--for=condition=Available", "deployment", "--all", "--timeout=2m")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.WaitServiceRules(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	w := b.learn(t)
	b.waitNodePortsFromOutside(ctx, t, w)
	return w
}

// waitNodePortsFromOutside connects from outside the cluster to the
// NodePort on every Node until each answers. The NAT rules can name every
// endpoint while a Node still refuses its NodePort from outside (once in a
// run straight after another: "connection refused" for the scenario's
// external case). The probes' source ports are ephemeral, above every port
// the scenario checks.
func (b *bed) waitNodePortsFromOutside(ctx context.Context, t *testing.T, w *world) {
	t.Helper()
	for _, n := range b.Nodes {
		probe := kcase{name: "probe of " + n.Name + "'s NodePort from outside", from: "external",
			to: func(w *world) string { return w.nodeAddr[n.Name] + ":30080" }, proto: "tcp"}
		for {
			err := b.send(ctx, w, probe)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

func (b *bed) learn(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{pods: map[string]podInfo{}, nodeAddr: map[string]string{}}
	pods, err := b.Admin.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		w.pods[p.Labels["app"]] = podInfo{name: p.Name, ip: p.Status.PodIP, node: p.Spec.NodeName}
	}
	svc, err := b.Admin.CoreV1().Services("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.clusterIP = svc.Spec.ClusterIP
	for _, n := range b.Nodes {
		w.nodeAddr[n.Name] = n.Addr.String()
	}
	return w
}

func podAt(app, port string) func(*world) string {
	return func(w *world) string { return w.pods[app].ip + ":" + port }
}

func (w *world) pod(app string) string { return w.pods[app].name }

// cases is the scenario: the connection kinds the issue names, each a real
// Pod (or host) talking through the real kube-proxy's NAT.
func cases() []kcase {
	return []kcase{
		{name: "Pod to Pod on one Node", from: "deploy/client-1", to: podAt("web-1", "8080"), proto: "tcp", sport: 21001,
			want: expect{flowType: 1, srcPod: "client-1", srcNode: "node-1", dstPod: "web-1", dstNode: "node-1", srcKind: "pod", dstKind: "pod", correlation: "not_required"}},
		{name: "Pod to Pod across Nodes", from: "deploy/client-1", to: podAt("web-2", "8080"), proto: "tcp", sport: 21002,
			want: expect{flowType: 2, srcPod: "client-1", srcNode: "node-1", dstPod: "web-2", dstNode: "node-2", srcKind: "pod", dstKind: "pod", correlation: "paired"}},
		{name: "Pod to Pod across Nodes over UDP", from: "deploy/client-1", to: podAt("web-2", "8080"), proto: "udp", sport: 21003,
			want: expect{flowType: 2, srcPod: "client-1", dstPod: "web-2", correlation: "paired"}},
		{name: "Pod to ClusterIP", from: "deploy/client-1", to: func(w *world) string { return w.clusterIP + ":80" }, proto: "tcp", sport: 21004,
			want: expect{flowType: 2, srcPod: "client-1", srcNode: "node-1", dstPod: "web-2", dstNode: "node-2", service: "shop/web:http", correlation: "paired"}},
		{name: "NodePort from outside the cluster, endpoint on another Node", from: "external",
			to: func(w *world) string { return w.nodeAddr["node-1"] + ":30080" }, proto: "tcp", sport: 21005,
			want: expect{flowType: 4, srcKind: "external", dstPod: "web-2", dstNode: "node-2", service: "shop/web-np:http", correlation: "paired", srcIsClient: true}},
		{name: "NodePort of the other Node from a Pod", from: "deploy/client-1",
			to: func(w *world) string { return w.nodeAddr["node-2"] + ":30080" }, proto: "tcp", sport: 21006,
			want: expect{flowType: 2, srcPod: "client-1", srcNode: "node-1", dstPod: "web-2", dstNode: "node-2", service: "shop/web-np:http", correlation: "paired"}},
		{name: "hostNetwork Pod to a Pod on another Node (Antrea #8260)", from: "deploy/hostclient", to: podAt("web-2", "8080"), proto: "tcp", sport: 21007,
			want: expect{flowType: 2, srcNode: "node-1", srcKind: "node", dstPod: "web-2", dstNode: "node-2", correlation: "paired"}},
		{name: "hostNetwork Pod to a Pod on its Node (Antrea #8260)", from: "deploy/hostclient", to: podAt("web-1", "8080"), proto: "tcp", sport: 21008,
			want: expect{flowType: 1, srcNode: "node-1", srcKind: "node", dstPod: "web-1", dstNode: "node-1", correlation: "not_required"}},
	}
}

// send makes one case's connection and returns the client's address as the
// client sees it ("" when not known from inside).
func (b *bed) send(ctx context.Context, w *world, c kcase, extra ...string) error {
	args := append([]string{"send", "-proto", c.proto, "-to", c.to(w), "-bytes", fmt.Sprint(requestBytes),
		"-sport", fmt.Sprint(c.sport), "-timeout", "20s"}, extra...)
	var out []byte
	var err error
	if c.from == "external" {
		var s string
		s, err = netlab.Exec(ctx, b.ExternalNS, append([]string{b.flowpeer}, args...)...)
		out = []byte(s)
	} else {
		var s string
		s, err = b.Kubectl(ctx, append([]string{"exec", "-n", "shop", c.from, "--", "/flowpeer"}, args...)...)
		out = []byte(s)
	}
	if err != nil {
		return fmt.Errorf("%s: %w: %s", c.name, err, out)
	}
	return nil
}

// row is the latest row of a connection and what its chain adds up to.
type row struct {
	rows, notPaired, ends                      uint64
	deltas, total, reverseDeltas, reverseTotal uint64
	flowType                                   uint8
	srcIP, srcPod, srcNode, srcKind            string
	dstPod, dstNode, dstKind                   string
	service, correlation                       string
	srcNS, dstNS                               string
}

func readRow(ctx context.Context, conn clickhouse.Conn, proto uint8, sport uint16) (row, error) {
	var r row
	err := conn.QueryRow(ctx, `SELECT count(), countIf(correlationState != 'paired'), countIf(flowEndReason = 3),
		sum(octetDeltaCount), max(octetTotalCount), sum(reverseOctetDeltaCount), max(reverseOctetTotalCount),
		argMax(flowType, timeInserted), argMax(sourceIP, timeInserted),
		argMax(sourcePodName, timeInserted), argMax(sourceNodeName, timeInserted), argMax(sourceEndpointKind, timeInserted),
		argMax(destinationPodName, timeInserted), argMax(destinationNodeName, timeInserted), argMax(destinationEndpointKind, timeInserted),
		argMax(destinationServicePortName, timeInserted), argMax(correlationState, timeInserted),
		argMax(sourcePodNamespace, timeInserted), argMax(destinationPodNamespace, timeInserted)
		FROM `+database+`.flows WHERE sourceTransportPort = ? AND protocolIdentifier = ?`, sport, proto).Scan(
		&r.rows, &r.notPaired, &r.ends, &r.deltas, &r.total, &r.reverseDeltas, &r.reverseTotal,
		&r.flowType, &r.srcIP, &r.srcPod, &r.srcNode, &r.srcKind, &r.dstPod, &r.dstNode, &r.dstKind,
		&r.service, &r.correlation, &r.srcNS, &r.dstNS)
	return r, err
}

// problems lists how r differs from what case c must produce.
func (c kcase) problems(w *world, r row) []string {
	var bad []string
	want := func(field string, got, want any, checked bool) {
		if checked && fmt.Sprint(got) != fmt.Sprint(want) {
			bad = append(bad, fmt.Sprintf("%s = %v, want %v", field, got, want))
		}
	}
	e := c.want
	if r.rows == 0 {
		return []string{"no row"}
	}
	want("flowType", r.flowType, e.flowType, e.flowType != 0)
	want("sourcePodName", r.srcPod, w.pod(e.srcPod), e.srcPod != "")
	want("sourcePodNamespace", r.srcNS, "shop", e.srcPod != "")
	want("sourceNodeName", r.srcNode, e.srcNode, e.srcNode != "")
	want("sourceEndpointKind", r.srcKind, e.srcKind, e.srcKind != "")
	want("destinationPodName", r.dstPod, w.pod(e.dstPod), e.dstPod != "")
	want("destinationPodNamespace", r.dstNS, "shop", e.dstPod != "")
	want("destinationNodeName", r.dstNode, e.dstNode, e.dstNode != "")
	want("destinationEndpointKind", r.dstKind, e.dstKind, e.dstKind != "")
	want("destinationServicePortName", r.service, e.service, e.service != "")
	want("correlationState", r.correlation, e.correlation, e.correlation != "")
	if strings.HasPrefix(c.from, "deploy/") && e.srcPod != "" {
		want("sourceIP", r.srcIP, w.pods[e.srcPod].ip, true)
	}
	if e.srcIsClient {
		want("sourceIP", r.srcIP, kubeExternal, true)
	}
	if e.correlation == "paired" && r.notPaired != 0 {
		bad = append(bad, fmt.Sprintf("%d of %d rows not paired", r.notPaired, r.rows))
	}
	if r.deltas != r.total || r.reverseDeltas != r.reverseTotal {
		bad = append(bad, fmt.Sprintf("deltas %d/%d do not add up to totals %d/%d", r.deltas, r.reverseDeltas, r.total, r.reverseTotal))
	}
	if c.proto == "tcp" && r.ends != 1 {
		bad = append(bad, fmt.Sprintf("%d end-of-flow rows, want 1", r.ends))
	}
	// The payload plus at most 80 bytes of IP and transport headers per packet
	// (a TCP connection of this size is under 20 packets each way).
	if r.total < requestBytes || r.total > requestBytes+80*20 {
		bad = append(bad, fmt.Sprintf("request octets %d, want %d payload bytes plus headers", r.total, requestBytes))
	}
	if r.reverseTotal < replyBytes || r.reverseTotal > replyBytes+80*20 {
		bad = append(bad, fmt.Sprintf("reply octets %d, want %d payload bytes plus headers", r.reverseTotal, replyBytes))
	}
	return bad
}

var kubeExternal = "192.168.77.100"

// checkCases waits until every case's row is right (the last state counts),
// then holds on for settle in which no row may come to spoil it.
func (b *bed) checkCases(t *testing.T, w *world, cs []kcase, timeout, settle time.Duration) {
	t.Helper()
	ctx := context.Background()
	conn := b.clickhouse(t)
	read := func() []string {
		var bad []string
		for _, c := range cs {
			proto := uint8(6)
			if c.proto == "udp" {
				proto = 17
			}
			r, err := readRow(ctx, conn, proto, c.sport)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", c.name, err))
				continue
			}
			if p := c.problems(w, r); len(p) > 0 {
				bad = append(bad, fmt.Sprintf("%s (port %d, %d rows): %s", c.name, c.sport, r.rows, strings.Join(p, "; ")))
			}
		}
		return bad
	}
	deadline := time.Now().Add(timeout)
	for {
		bad := read()
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.dumpPods(t)
			t.Fatalf("rows not right after %s:\n%s\n%s", timeout, strings.Join(bad, "\n"), dumpRows(ctx, conn, casePorts(cs)))
		}
		time.Sleep(time.Second)
	}
	time.Sleep(settle)
	if bad := read(); len(bad) > 0 {
		t.Fatalf("rows came after the connections were right:\n%s", strings.Join(bad, "\n"))
	}
}

// runCases makes every case's connection, concurrently.
func (b *bed) runCases(t *testing.T, w *world, cs []kcase) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs[i] = b.send(ctx, w, c)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// TestKubeProxyIptables installs flowtel with its chart on a cluster whose
// kube-proxy runs in iptables mode, makes every scenario connection between
// real Pods, and checks each one is one correct row in ClickHouse.
func TestKubeProxyIptables(t *testing.T) {
	b := startBed(t, "iptables")
	before := b.clusterWide(t)
	b.installFlowtel(t, "flowtel", "flowtel")
	w := b.startWorkloads(t)
	b.runCases(t, w, cases())
	b.checkCases(t, w, cases(), 90*time.Second, 10*time.Second)

	t.Log("day two: both tiers restarted by rollouts during steady traffic")
	logs := b.followLogs(t, "flowtel")
	sports := []uint16{22001, 22002, 22003, 22004}
	const pull = 400_000
	wait := b.transfers(t, w, sports, pull, 40*time.Second)
	time.Sleep(5 * time.Second)
	b.rolloutRestart(t, "flowtel", "daemonset/flowtel-node")
	gatewaysRestarted := time.Now()
	b.rolloutRestart(t, "flowtel", "statefulset/flowtel-gateway")
	wait()
	// A replaced gateway takes every export until the node collectors have
	// moved its keys to the others (it drains before it stops): a node's
	// export it refused instead would be retried to its successor, out of
	// order with what its keys' new owner took meanwhile, and the two
	// processes' counts would overlap or leave a gap between them.
	if failed := logs.since(gatewaysRestarted, "flowtel-node", failedExport); len(failed) > 0 {
		t.Errorf("node collectors' exports failed while the gateways were replaced:\n%s", strings.Join(failed, "\n"))
	}
	b.checkTransfers(t, sports, pull, 2*time.Minute, 10*time.Second)

	t.Log("day two: helm upgrade with a changed value, then the scenario again")
	b.helmRun(t, "upgrade", "flowtel", b.chart, "-n", "flowtel", "--reuse-values", "--wait", "--timeout", "4m",
		"--set", "node.conntrack.poll_interval=2s")
	// No wait for the upgraded collectors to settle: a connection made while
	// they start is reported once too. (It was not, 1 run in 5, while the
	// node retried whole batches: a part a gateway took went again to another
	// one when the ring changed between tries, as it does while a restarted
	// node collector's resolver fills; see TestNodeSendsEachRecordToItsReplicaOnce.)
	again := shifted(cases(), 100)
	b.runCases(t, w, again)
	b.checkCases(t, w, again, 90*time.Second, 5*time.Second)
	b.requireNoRestarts(t)

	t.Log("day two: helm uninstall leaves nothing behind")
	b.helmRun(t, "uninstall", "flowtel", "-n", "flowtel", "--wait", "--timeout", "2m")
	b.requireNothingLeft(t, before, "flowtel")
}

// shifted is cs with source ports moved by d: the same connections again, found apart.
func shifted(cs []kcase, d uint16) []kcase {
	for i := range cs {
		cs[i].sport += d
	}
	return cs
}

// clusterWide lists the cluster-scoped objects an install may make, to tell
// afterwards what it left. (No APIServices: flowtel ships none, and the API
// server adds one per CRD group version, e.g. for the Operator's CRDs.)
func (b *bed) clusterWide(t *testing.T) map[string]bool {
	t.Helper()
	out := b.kubectl(t, "get", "clusterroles,clusterrolebindings,mutatingwebhookconfigurations,validatingwebhookconfigurations,priorityclasses", "-o", "name")
	names := map[string]bool{}
	for _, l := range strings.Fields(out) {
		names[l] = true
	}
	return names
}

// requireNothingLeft fails when an uninstall left objects in namespace
// (beyond what Kubernetes itself puts in every namespace, and keep: the
// user's own) or cluster-scoped objects that were not there before it
// (clusterWide's list).
func (b *bed) requireNothingLeft(t *testing.T, before map[string]bool, namespace string, keep ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var left []string
		out := b.kubectl(t, "get", "all,secrets,configmaps,serviceaccounts,roles,rolebindings,leases,pvc,poddisruptionbudgets,networkpolicies",
			"-n", namespace, "-o", "name")
		for _, l := range strings.Fields(out) {
			if l != "configmap/kube-root-ca.crt" && l != "serviceaccount/default" && !slices.Contains(keep, l) {
				left = append(left, namespace+": "+l)
			}
		}
		for l := range b.clusterWide(t) {
			if !before[l] {
				left = append(left, l)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(left)
			t.Fatalf("left behind after uninstall:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(time.Second)
	}
}

// transfers starts long downloads from client-1 to web-2 (pull bytes over
// d, from the given source ports) and returns a function that waits for them.
func (b *bed) transfers(t *testing.T, w *world, sports []uint16, pull int, d time.Duration) func() {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(sports))
	for i, sp := range sports {
		c := kcase{name: fmt.Sprintf("transfer from port %d", sp), from: "deploy/client-1", to: podAt("web-2", "8080"), proto: "tcp", sport: sp}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
			defer cancel()
			errs[i] = b.send(ctx, w, c, "-pull", fmt.Sprint(pull), "-over", d.String(), "-timeout", (d + 30*time.Second).String())
		})
	}
	return func() {
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	}
}

// rolloutRestart restarts a workload the way an operator does and waits for it.
func (b *bed) rolloutRestart(t *testing.T, namespace, workload string) {
	t.Helper()
	start := time.Now()
	b.kubectl(t, "rollout", "restart", "-n", namespace, workload)
	b.kubectl(t, "rollout", "status", "-n", namespace, workload, "--timeout=3m")
	t.Logf("bed: rollout restart %s: %s", workload, time.Since(start).Round(time.Second))
}

// checkTransfers checks each transfer is one paired chain that ended, whose
// deltas add up to its totals, and whose reply carried the pulled bytes: no
// byte counted twice, none lost, across the restarts.
func (b *bed) checkTransfers(t *testing.T, sports []uint16, pull int, timeout, settle time.Duration) {
	t.Helper()
	ctx := context.Background()
	conn := b.clickhouse(t)
	read := func() []string {
		var bad []string
		for _, sp := range sports {
			r, err := readRow(ctx, conn, 6, sp)
			if err != nil {
				bad = append(bad, err.Error())
				continue
			}
			switch {
			case r.rows == 0:
				bad = append(bad, fmt.Sprintf("port %d: no row", sp))
			case r.notPaired != 0 || r.ends != 1 || r.deltas != r.total || r.reverseDeltas != r.reverseTotal:
				bad = append(bad, fmt.Sprintf("port %d: %d rows (%d not paired, %d end of flow), bytes %d deltas / %d total, reverse %d / %d",
					sp, r.rows, r.notPaired, r.ends, r.deltas, r.total, r.reverseDeltas, r.reverseTotal))
			case r.reverseTotal < uint64(pull) || r.reverseTotal > uint64(pull)*11/10:
				bad = append(bad, fmt.Sprintf("port %d: reply octets %d, want the %d pulled plus headers", sp, r.reverseTotal, pull))
			}
		}
		return bad
	}
	deadline := time.Now().Add(timeout)
	for {
		bad := read()
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("transfers not one whole chain after %s:\n%s\n%s", timeout, strings.Join(bad, "\n"), dumpRows(ctx, conn, sports))
		}
		time.Sleep(time.Second)
	}
	time.Sleep(settle)
	if bad := read(); len(bad) > 0 {
		t.Fatalf("rows came after the transfers were whole:\n%s\n%s", strings.Join(bad, "\n"), dumpRows(ctx, conn, sports))
	}
	// The listing a failure shows must work on the day it is needed (its
	// query named columns the table does not have, which hid a failure).
	if _, err := queryRows(ctx, conn, sports); err != nil {
		t.Errorf("listing the transfers' rows: %v", err)
	}
}

// TestKubeProxyNftables: the same connections through kube-proxy's nftables
// mode, whose NAT flowtel reads from the same conntrack table.
func TestKubeProxyNftables(t *testing.T) {
	b := startBed(t, "nftables")
	b.installFlowtel(t, "flowtel", "flowtel")
	w := b.startWorkloads(t)
	b.runCases(t, w, cases())
	b.checkCases(t, w, cases(), 90*time.Second, 10*time.Second)
	t.Log("a sender presenting another Node's collector token")
	b.requireForgedTokenRefused(t, w, "flowtel", "flowtel")
	b.requireNoRestarts(t)
}

func casePorts(cs []kcase) []uint16 {
	var out []uint16
	for _, c := range cs {
		out = append(out, c.sport)
	}
	return out
}

// dumpRows lists every row of the connections from the source ports, for a
// failure: with each side's latest end and throughput (Antrea's schema has
// no column for a side's own counters), so that a row counted twice tells
// whether the sink took one export twice (the same row again) or a gateway
// counted a Node's range again (another row over the same range), and a row
// missing shows as a gap in the ends.
func dumpRows(ctx context.Context, conn clickhouse.Conn, ports []uint16) string {
	out, err := queryRows(ctx, conn, ports)
	if err != nil {
		return "rows not listed: " + err.Error()
	}
	return out
}

func queryRows(ctx context.Context, conn clickhouse.Conn, ports []uint16) (string, error) {
	// The ports are inlined: ClickHouse 18.16 takes no array parameter for
	// IN ("Type mismatch in IN or VALUES section"), which hid every dump.
	var sports []string
	for _, p := range ports {
		sports = append(sports, strconv.Itoa(int(p)))
	}
	rows, err := conn.Query(ctx, `SELECT toString(tuple(sourceIP, sourceTransportPort, destinationIP, destinationTransportPort, protocolIdentifier,
		flowType, correlationState, flowEndReason, octetDeltaCount, octetTotalCount, reverseOctetDeltaCount, reverseOctetTotalCount,
		flowEndSecondsFromSourceNode, throughputFromSourceNode, reverseThroughputFromSourceNode,
		flowEndSecondsFromDestinationNode, throughputFromDestinationNode, reverseThroughputFromDestinationNode,
		sourcePodName, destinationPodName, sourceNodeName, destinationNodeName, destinationServicePortName, flowStartSeconds, flowEndSeconds, timeInserted))
		FROM `+database+`.flows WHERE sourceTransportPort IN (`+strings.Join(sports, ",")+`) ORDER BY sourceTransportPort, flowEndSeconds, timeInserted`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return "", err
		}
		out = append(out, r)
	}
	return strings.Join(out, "\n"), rows.Err()
}
