//go:build integration

package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/distributions"
	"github.com/flowtel/flowtel/testbed/chserver"
	"github.com/flowtel/flowtel/testbed/cluster"
	"github.com/flowtel/flowtel/testbed/collector"
	"github.com/flowtel/flowtel/testbed/controlplane"
	"github.com/flowtel/flowtel/testbed/ipfixcollector"
	"github.com/flowtel/flowtel/testbed/netlab"
	"github.com/flowtel/flowtel/testbed/peer"
)

const repoRoot = "../.."

// options shape a bed: how many gateway replicas, and whether the gateways also
// export IPFIX to a real go-ipfix collector and OTLP to a receiver in the test.
type options struct {
	gateways int
	ipfix    bool
	otlp     bool
	// node collector timers; zero: the scenario's fast ones (1s poll, 2s active and idle)
	poll, active, idle time.Duration
	// nodeStorage gives each node collector a file_storage directory and the
	// conntrack receiver storage: file_storage (restart tests); nodeTap, when
	// set, is an OTLP endpoint that also receives what the node collectors export.
	nodeStorage bool
	nodeTap     string
	// conntrackExtra is appended to the conntrack receiver's settings, e.g. ", events: false".
	conntrackExtra string
	// k8sFlowExtra is appended to the k8s_flow processor's settings, e.g. ", pod_labels: true".
	k8sFlowExtra string
	// otlpTo, when set, is where the gateways export over OTLP (in place of the test's OTLP sink).
	otlpTo string
	// asShipped runs the collectors the way the shipped configurations
	// run in a cluster, where the overlay otherwise trims them for the
	// bed's assertions: the node collectors with file_storage (the
	// receiver's export state and the persistent sending queue) and
	// denied connections from NFLOG group 100 (`denied: {}`), the gateways
	// with their own Kubernetes index. (The shipped gateway runs two
	// replicas: tests that mean it ask for gateways: 2.)
	asShipped bool
	// antreaAgents makes the node collectors export as Antrea's agents do
	// (the ipfix exporter in Antrea's agent layout, each Node's observation
	// domain) to the gateway's antrea_flows receiver (one gateway), in place
	// of OTLP through load_balancing; agentEndpoint is that receiver's address.
	antreaAgents  bool
	agentEndpoint string
	// chQueue, when set, is the gateways' clickhouse_flows sending_queue
	// (YAML flow style), e.g. a small one that a paused server fills.
	chQueue string
}

// bed is one running mini-cluster with flowtel deployed on it.
type bed struct {
	opt      options
	ipfix    *ipfixSink
	otlp     *otlpSink
	lab      *netlab.Lab
	pods     map[string]*netlab.Pod
	services map[string]*netlab.Service
	ch       *chserver.Server
	cp       *controlplane.ControlPlane
	gateways []*collector.Process
	// gatewayOptions start gateway i again on the same ports (fault tests)
	gatewayOptions []collector.Options
	nodes          []*collector.Process
	// nodeOptions start node collector i again as it was (restart tests)
	nodeOptions []collector.Options
	peer        string // flowpeer binary
}

// TestScenarios runs every case of Cases() through the whole product and reads
// the records back from every sink: ClickHouse, a real go-ipfix collector and
// an OTLP receiver.
func TestScenarios(t *testing.T) {
	b := startBed(t, options{gateways: 1, ipfix: true, otlp: true})
	for _, c := range Cases() {
		b.run(t, c)
	}
	b.check(t, Cases(), 90*time.Second)
	b.checkSinks(t, Cases(), 30*time.Second)
	b.checkDashboards(t)
	if os.Getenv("FLOWTEL_DEMO") == "" {
		b.writeMap(t, t.TempDir())
		return
	}
	b.printFlows(t)
	dot, svg := b.writeMap(t, filepath.Join(repoRoot, "_build", "demo"))
	fmt.Printf("\nMap of these flows (flowctl map): %s", dot)
	if svg != "" {
		fmt.Printf(", drawn: %s", svg)
	}
	fmt.Println()
	b.holdForQueries()
}

// holdForQueries keeps the demo cluster up for FLOWTEL_DEMO_HOLD (e.g. 10m) so
// the ClickHouse table can be queried by hand; everything is torn down after.
func (b *bed) holdForQueries() {
	hold, err := time.ParseDuration(os.Getenv("FLOWTEL_DEMO_HOLD"))
	fmt.Printf("\nClickHouse: %s, database flowtel_e2e, table flows (clickhouse-client --port %d).\n", b.ch.Endpoint(), b.ch.TCPPort)
	if err != nil || hold <= 0 {
		fmt.Println("The demo tears everything down now; run `make demo DEMO_HOLD=10m` to keep it up for queries.")
		return
	}
	fmt.Printf("Kept up for %s, then torn down.\n", hold)
	time.Sleep(hold)
}

// printFlows shows what `make demo` is about: the flows table as a user would query it.
func (b *bed) printFlows(t *testing.T) {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	rows, err := conn.Query(context.Background(), `SELECT flowType, correlationState,
		concat(sourceIP, ':', toString(sourceTransportPort)), if(sourcePodName != '', concat(sourcePodNamespace, '/', sourcePodName), sourceEndpointKind), sourceNodeName,
		concat(destinationIP, ':', toString(destinationTransportPort)), if(destinationPodName != '', concat(destinationPodNamespace, '/', destinationPodName), destinationEndpointKind), destinationNodeName,
		destinationServicePortName, octetTotalCount, reverseOctetTotalCount
		FROM flowtel_e2e.flows ORDER BY sourceTransportPort, flowEndSeconds DESC LIMIT 1 BY sourceIP, sourceTransportPort, destinationIP`)
	require.NoError(t, err)
	defer rows.Close()
	fmt.Printf("\n%-4s %-12s %-28s %-16s %-8s %-28s %-16s %-8s %-24s %8s %8s\n",
		"type", "correlation", "source", "identity", "node", "destination", "identity", "node", "service", "bytes", "reply")
	for rows.Next() {
		var ft uint8
		var state, src, srcID, srcNode, dst, dstID, dstNode, svc string
		var bytes, reply uint64
		require.NoError(t, rows.Scan(&ft, &state, &src, &srcID, &srcNode, &dst, &dstID, &dstNode, &svc, &bytes, &reply))
		fmt.Printf("%-4d %-12s %-28s %-16s %-8s %-28s %-16s %-8s %-24s %8d %8d\n", ft, state, src, srcID, srcNode, dst, dstID, dstNode, svc, bytes, reply)
	}
	require.NoError(t, rows.Err())
}

func requireEnvironment(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the testbed needs root (network namespaces); CI runs as root")
	}
}

// TestScaleOut runs the scenario with three gateway replicas behind the node
// collectors' load_balancing exporter (routing on flow.key): every connection
// must come out exactly as with one replica, at every sink.
func TestScaleOut(t *testing.T) {
	b := startBed(t, options{gateways: 3, ipfix: true, otlp: true})
	for _, c := range Cases() {
		b.run(t, c)
	}
	b.check(t, Cases(), 90*time.Second)
	b.checkSinks(t, Cases(), 30*time.Second)
	for _, g := range b.gateways {
		accepted := acceptedRecords(t, g)
		assert.Positive(t, accepted, "%s received no records: the load is not spread", g.Name)
	}
}

func startBed(t testing.TB, opt options) *bed {
	t.Helper()
	requireEnvironment(t)
	nodeBin, err := collector.Binary(repoRoot, "flowtel-node")
	require.NoError(t, err)
	gatewayBin, err := collector.Binary(repoRoot, "flowtel-gateway")
	require.NoError(t, err)
	require.NoError(t, netlab.Cleanup())
	// One-time builds come before the bed's deadline: on a cold machine the
	// control plane alone takes minutes to build (make runs scripts/peers.sh
	// first; a plain `go test` builds here, and says so).
	t.Log("bed: control plane binaries (built once per machine if missing: 5-10 min cold)")
	_, err = controlplane.Binaries()
	require.NoError(t, err)
	if opt.ipfix {
		t.Log("bed: go-ipfix collector binary (built once per machine if missing: ~30 s cold)")
		_, err = ipfixcollector.BuildBinary()
		require.NoError(t, err)
	}

	t.Log("bed: data plane (network namespaces, routes, Service rules)")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	b := &bed{opt: opt, pods: map[string]*netlab.Pod{}, services: map[string]*netlab.Service{}}
	b.peer = peer.Build(t)

	// Data plane.
	// Three Nodes: a NodePort's endpoint may run on neither the client's Node
	// nor the NodePort's.
	b.lab, err = netlab.New(ctx, netlab.RunID(), 3)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.lab.Close() })
	n1, n2, n3 := b.lab.Nodes[0], b.lab.Nodes[1], b.lab.Nodes[2]
	for _, p := range []struct {
		node *netlab.Node
		name string
	}{{n1, "client-a"}, {n1, "web-a"}, {n2, "web-b"}, {n3, "web-c"}} {
		pod, err := b.lab.AddPod(ctx, p.node, "default", p.name)
		require.NoError(t, err)
		b.pods[p.name] = pod
	}
	for _, name := range []string{"web-a", "web-b", "web-c"} {
		peer.Serve(t, b.peer, b.pods[name].NS, replyBytes)
	}
	peer.Serve(t, b.peer, b.lab.External.NS, replyBytes)
	svc := func(name string, ip4, ip6 string, ep *netlab.Pod, nodePort uint16, masq bool) *netlab.Service {
		return &netlab.Service{Namespace: "default", Name: name, Protocol: "tcp", Port: 80, TargetPort: 8080, NodePort: nodePort,
			ClusterIPv4: netip.MustParseAddr(ip4), ClusterIPv6: netip.MustParseAddr(ip6), MasqueradeHost: masq,
			Endpoints: []*netlab.Pod{ep}}
	}
	b.services["web-remote"] = svc("web-remote", "10.96.0.10", "fd00:10:96::10", b.pods["web-b"], 30080, false)
	b.services["web-local"] = svc("web-local", "10.96.0.11", "fd00:10:96::11", b.pods["web-a"], 0, false)
	b.services["web-masq"] = svc("web-masq", "10.96.0.12", "fd00:10:96::12", b.pods["web-b"], 0, true)
	b.services["web-etp-local"] = svc("web-etp-local", "10.96.0.13", "fd00:10:96::13", b.pods["web-b"], 30081, false)
	b.services["web-etp-local"].ExternalTrafficPolicyLocal = true
	b.services["web-far"] = svc("web-far", "10.96.0.14", "fd00:10:96::14", b.pods["web-c"], 30082, false)
	for _, s := range b.services {
		require.NoError(t, b.lab.AddService(ctx, s))
	}

	// Control plane and API objects.
	t.Log("bed: kube-apiserver, etcd and the cluster's API objects")
	cp := controlplane.Start(t)
	b.cp = cp
	require.NoError(t, cluster.RegisterNodes(ctx, cp.Admin, b.lab))
	for _, p := range b.pods {
		require.NoError(t, cluster.RegisterPod(ctx, cp.Admin, p, map[string]string{"app": p.Name}))
	}
	for name, s := range b.services {
		portName := "http"
		if name == "web-local" {
			portName = "" // an unnamed port: the Service name has no ":port" part
		}
		require.NoError(t, cluster.RegisterService(ctx, cp.Admin, s, portName))
	}
	kubeconfig := cp.Kubeconfig(t, "flowtel", cp.AdminToken)
	// Node identity as deployed: each node collector runs as ServiceAccount
	// flowtel-node in a Pod on its Node and sends that Pod's projected token;
	// the gateways review it as ServiceAccount flowtel-gateway, bound to
	// system:auth-delegator.
	cp.ServiceAccount(t, "flowtel", "flowtel-node")
	nodeTokens := map[string]string{}
	for _, n := range b.lab.Nodes {
		nodeTokens[n.Name] = cp.PodToken(t, "flowtel", "flowtel-node-"+n.Name, "flowtel-node", n.Name, "flowtel-gateway")
	}

	// Sinks and collectors.
	t.Log("bed: sinks (ClickHouse, IPFIX) and flowtel's collectors")
	b.ch = chserver.Start(t, chserver.Options{})
	sinks := gatewaySinks{clickhouse: b.ch.Endpoint(), identity: cp.DelegatingServiceAccount(t, "flowtel", "flowtel-gateway", false), chQueue: opt.chQueue}
	// As shipped, the gateway may read Nodes (node_identity checks the
	// addresses a record uses as its Node's own against them).
	allowNodeReads(t, cp, "flowtel", "flowtel-gateway")
	if opt.asShipped {
		opt.nodeStorage = true
		opt.conntrackExtra += ", denied: {}"
		sinks.kubeconfig = kubeconfig
		b.opt = opt
	}
	if opt.ipfix {
		col := ipfixcollector.Start(t, ipfixcollector.Options{})
		br := startBridge(t, col)
		b.ipfix = newIPFIXSink(t, col, br)
		sinks.ipfix = br.addr
	}
	if opt.otlp {
		b.otlp = startOTLPSink(t)
		sinks.otlp = b.otlp.endpoint
	}
	if opt.otlpTo != "" {
		sinks.otlp = opt.otlpTo
	}
	dir := t.TempDir()
	for name, token := range nodeTokens {
		require.NoError(t, os.WriteFile(nodeTokenFile(dir, name), []byte(token), 0o600))
	}
	if opt.antreaAgents {
		require.Equal(t, 1, opt.gateways, "agents export to one gateway")
		opt.agentEndpoint = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		sinks.antreaIPFIX = opt.agentEndpoint
		b.opt = opt
	}
	var gatewayEndpoints []string
	for i := range opt.gateways {
		port := freePort(t)
		g, o := startCollector(t, ctx, gatewayCollector(t, fmt.Sprintf("gateway-%d", i), gatewayBin, dir, port, sinks))
		b.gateways = append(b.gateways, g)
		b.gatewayOptions = append(b.gatewayOptions, o)
		gatewayEndpoints = append(gatewayEndpoints, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for _, n := range b.lab.Nodes {
		p, o := startCollector(t, ctx, nodeCollector(t, n, nodeBin, kubeconfig, gatewayEndpoints, opt, dir))
		b.nodes = append(b.nodes, p)
		b.nodeOptions = append(b.nodeOptions, o)
	}
	return b
}

// startCollector starts a collector on free health and telemetry ports, stops
// it when the test ends, and returns the options that start it again as it is.
func startCollector(t testing.TB, ctx context.Context, o collector.Options) (*collector.Process, collector.Options) {
	t.Helper()
	if o.HealthPort == 0 {
		o.HealthPort, o.MetricsPort = freePort(t), freePort(t)
		o.Config = strings.NewReplacer("HEALTH_PORT", fmt.Sprint(o.HealthPort), "METRICS_PORT", fmt.Sprint(o.MetricsPort)).Replace(o.Config)
	}
	p, err := collector.Start(ctx, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("%s: %v", o.Name, err)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", o.Name, p.LogTail(60))
		}
	})
	return p, o
}

const telemetry = `
  telemetry:
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: METRICS_PORT
`

// gatewaySinks are the endpoints a gateway exports to; empty: not exported.
// kubeconfig, when set, gives the gateway its Kubernetes index (as shipped);
// empty: none. identity, when set, is the kubeconfig node_identity reviews
// the node collectors' tokens with (as shipped); empty: no node_identity in
// the pipeline.
type gatewaySinks struct{ clickhouse, ipfix, otlp, kubeconfig, antreaIPFIX, identity, chQueue string }

// The bed runs the shipped configurations of distributions/ (what kustomize,
// Helm and the Operator deploy), each with a small overlay the collector merges
// over it (a second --config: maps merge, lists replace) for what a test bed
// needs: loopback ports, the netlab Node's network namespace and fast timers,
// a kubeconfig instead of a service account, a static list of gateways
// instead of the headless Service, and the sinks. Node collectors and gateways
// talk mutual TLS as shipped, with the certificates deploy/certs.sh makes
// (bedCerts), given through the environment variables the deployments set.

// bedCerts makes, once per directory, the certificates deploy/certs.sh makes
// for namespace flowtel (the bed's POD_NAMESPACE), and returns where they are.
func bedCerts(t testing.TB, dir string) string {
	t.Helper()
	certs := filepath.Join(dir, "certs")
	if _, err := os.Stat(filepath.Join(certs, "ca.crt")); err == nil {
		return certs
	}
	out, err := exec.Command(filepath.Join(repoRoot, "deploy", "certs.sh"), "--namespace", "flowtel", "--out", certs).CombinedOutput()
	require.NoError(t, err, "deploy/certs.sh: %s", out)
	return certs
}

// gatewayCollector starts a gateway the way the deployments run it: its
// certificate, and node collectors' client certificates required.
func gatewayCollector(t testing.TB, name, binary, dir string, otlpPort int, sinks gatewaySinks) collector.Options {
	certs := bedCerts(t, dir)
	return collector.Options{Name: name, Binary: binary, Dir: dir,
		Configs: []string{distributions.Config(distributions.Gateway)}, Config: gatewayOverlay(otlpPort, sinks),
		Env: []string{"FLOWTEL_TLS_CERT_FILE=" + filepath.Join(certs, "gateway.crt"), "FLOWTEL_TLS_KEY_FILE=" + filepath.Join(certs, "gateway.key"),
			"FLOWTEL_TLS_CLIENT_CA_FILE=" + filepath.Join(certs, "node-ca.crt"), "POD_NAMESPACE=flowtel"}}
}

// gatewayOverlay: OTLP on loopback, no Kubernetes index unless the sinks
// name a kubeconfig (the bed's assertions are mostly about what the node
// collectors name), the scenario's fast timers and the sinks in the logs
// pipeline.
func gatewayOverlay(otlpPort int, sinks gatewaySinks) string {
	exporters := []string{"clickhouse_flows"}
	var extra strings.Builder
	if sinks.ipfix != "" {
		exporters = append(exporters, "ipfix")
		fmt.Fprintf(&extra, "  ipfix: {endpoint: %q, cluster_uuid: 0b0c0d0e-0000-4000-8000-000000000001}\n", sinks.ipfix)
	}
	if sinks.otlp != "" {
		exporters = append(exporters, "otlp")
		fmt.Fprintf(&extra, "  otlp: {endpoint: %q, tls: {insecure: true}}\n", sinks.otlp)
	}
	index := "{enabled: false}"
	if sinks.kubeconfig != "" {
		index = fmt.Sprintf("{auth_type: kubeConfig, kubeconfig: %s}", sinks.kubeconfig)
	}
	identity := fmt.Sprintf("  node_identity: {auth_type: kubeConfig, kubeconfig: %s}\n", sinks.identity)
	processors := "[memory_limiter, node_identity, flow_correlation]"
	if sinks.identity == "" {
		identity, processors = "", "[memory_limiter, flow_correlation]"
	}
	receivers, antrea := "[otlp]", ""
	queue := "{batch: {flush_timeout: 500ms, min_size: 1}}"
	if sinks.chQueue != "" {
		queue = sinks.chQueue
	}
	if sinks.antreaIPFIX != "" {
		receivers = "[otlp, antrea_flows]"
		// As shipped: IPFIX over TLS, each agent's client certificate
		// required (the bed's agents present the node certificate), and
		// the records handed on in the compact form.
		antrea = fmt.Sprintf("  antrea_flows: {ipfix: {endpoint: %q, transports: [tcp]}, grpc: {endpoint: \"\"}, encoding: compact,\n"+
			"    tls: {cert_file: \"${env:FLOWTEL_TLS_CERT_FILE}\", key_file: \"${env:FLOWTEL_TLS_KEY_FILE}\", client_ca_file: \"${env:FLOWTEL_TLS_CLIENT_CA_FILE}\"}}\n", sinks.antreaIPFIX)
	}
	return fmt.Sprintf(`
extensions:
  health_check: {endpoint: "127.0.0.1:HEALTH_PORT"}
receivers:
  otlp: {protocols: {grpc: {endpoint: "127.0.0.1:%d"}}}
%sprocessors:
%s  flow_correlation: {active_timeout: 3s, inactive_timeout: 6s, pairing_timeout: 10s, kubernetes: %s}
exporters:
  clickhouse_flows:
    endpoint: %s
    database: flowtel_e2e
    create_schema: true
    sending_queue: %s
%sservice:
  pipelines:
    logs: {receivers: %s, processors: %s, exporters: [%s, signal_to_metrics]}
`+telemetry, otlpPort, antrea, identity, index, sinks.clickhouse, queue, extra.String(), receivers, processors, strings.Join(exporters, ", "))
}

// nodeTokenFile is where the bed keeps node's projected ServiceAccount token.
func nodeTokenFile(dir, node string) string { return filepath.Join(dir, node+".token") }

// nodeCollector starts node n's collector the way the DaemonSet runs it: it
// verifies the gateway's certificate (flowtel-gateway.flowtel.svc, whichever
// address it dials), presents the node client certificate and sends its
// Pod's token (nodeTokenFile), with the container's Go runtime settings.
func nodeCollector(t testing.TB, n *netlab.Node, binary, kubeconfig string, gateways []string, opt options, dir string) collector.Options {
	certs := bedCerts(t, dir)
	return collector.Options{Name: n.Name, Binary: binary, Dir: dir,
		Configs: []string{distributions.Config(distributions.Node)}, Config: nodeOverlay(n, kubeconfig, gateways, opt),
		Env: append(shippedNodeRuntimeEnv(t), "K8S_NODE_NAME="+n.Name, "POD_NAMESPACE=flowtel", "FLOWTEL_STORAGE_DIR="+filepath.Join(dir, n.Name+"-storage"),
			"FLOWTEL_GATEWAY_CA_FILE="+filepath.Join(certs, "ca.crt"),
			"FLOWTEL_TLS_CERT_FILE="+filepath.Join(certs, "node.crt"), "FLOWTEL_TLS_KEY_FILE="+filepath.Join(certs, "node.key"),
			"FLOWTEL_NODE_TOKEN_FILE="+nodeTokenFile(dir, n.Name))}
}

// nodeOverlay: node n's network namespace and the test's timers, the bed's
// kubeconfig, the shipped mutual TLS to a static list of gateways and, unless the
// test asks for it (opt.nodeStorage), no file_storage.
func nodeOverlay(n *netlab.Node, kubeconfig string, gateways []string, opt options) string {
	if opt.poll == 0 {
		opt.poll, opt.active, opt.idle = time.Second, 2*time.Second, 2*time.Second
	}
	extensions, noStorage, queue, tapExp, exporters := "health_check, bearertokenauth, file_storage", "", "", "", "load_balancing"
	if !opt.nodeStorage {
		extensions, noStorage, queue = "health_check, bearertokenauth", ", storage: null", "\n    sending_queue: {storage: null}"
	}
	if opt.nodeTap != "" {
		tapExp = fmt.Sprintf("  otlp/tap: {endpoint: %q, tls: {insecure: true}}\n", opt.nodeTap)
		exporters += ", otlp/tap"
	}
	if opt.antreaAgents {
		// As an Antrea agent of this Node: its template, its observation
		// domain (FNV-1 of the Node's name), one record per message.
		h := fnv.New32()
		_, _ = h.Write([]byte(n.Name))
		tapExp += fmt.Sprintf("  ipfix/agent: {endpoint: %q, transport: tls, record_layout: agent, observation_domain_id: %d, sending_queue: {batch: {flush_timeout: 200ms, min_size: 1}},\n"+
			"    tls: {ca_file: \"${env:FLOWTEL_GATEWAY_CA_FILE}\", cert_file: \"${env:FLOWTEL_TLS_CERT_FILE}\", key_file: \"${env:FLOWTEL_TLS_KEY_FILE}\", server_name_override: flowtel-gateway.flowtel.svc}}\n",
			opt.agentEndpoint, h.Sum32())
		exporters = strings.Replace(exporters, "load_balancing", "ipfix/agent", 1)
	}
	return fmt.Sprintf(`
extensions:
  health_check: {endpoint: "127.0.0.1:HEALTH_PORT"}
receivers:
  conntrack: {netns: %s, poll_interval: %s, active_timeout: %s, idle_timeout: %s%s%s}
processors:
  k8s_flow: {auth_type: kubeConfig, kubeconfig: %s%s}
exporters:
  load_balancing:%s
    resolver: {k8s: {enabled: false}, static: {hostnames: [%s]}}
%sservice:
  extensions: [%s]
  pipelines:
    logs: {exporters: [%s]}
`+telemetry, netlab.NetNSPath(n.NS), opt.poll, opt.active, opt.idle, noStorage, opt.conntrackExtra, kubeconfig, opt.k8sFlowExtra,
		queue, strings.Join(gateways, ", "), tapExp, extensions, exporters)
}

// endpoints resolves a case's From/To into a namespace and a destination.
func (b *bed) endpoints(c Case) (ns string, client netip.Addr, to netip.AddrPort) {
	pick := func(v4, v6 netip.Addr) netip.Addr {
		if c.IPv6 {
			return v6
		}
		return v4
	}
	node := func(name string) *netlab.Node {
		for _, n := range b.lab.Nodes {
			if n.Name == name {
				return n
			}
		}
		panic("no node " + name)
	}
	kind, name, _ := strings.Cut(c.From, ":")
	switch kind {
	case "pod":
		p := b.pods[name]
		ns, client = p.NS, pick(p.IPv4, p.IPv6)
	case "node":
		n := node(name)
		ns, client = n.NS, pick(n.GatewayV4, n.GatewayV6)
		if strings.HasPrefix(c.To, "nodeport:") {
			// Another Node's address is reached over the transport network.
			client = pick(n.TransportV4, n.TransportV6)
		}
	default:
		ns, client = b.lab.External.NS, pick(b.lab.External.IPv4, b.lab.External.IPv6)
	}
	kind, name, _ = strings.Cut(c.To, ":")
	switch kind {
	case "pod":
		p := b.pods[name]
		to = netip.AddrPortFrom(pick(p.IPv4, p.IPv6), c.port())
	case "service":
		s := b.services[name]
		to = netip.AddrPortFrom(pick(s.ClusterIPv4, s.ClusterIPv6), s.Port)
	case "nodeport":
		svcName, nodeName, _ := strings.Cut(name, "@")
		n := node(nodeName)
		to = netip.AddrPortFrom(pick(n.TransportV4, n.TransportV6), b.services[svcName].NodePort)
	default:
		to = netip.AddrPortFrom(pick(b.lab.External.IPv4, b.lab.External.IPv6), 8080)
	}
	return ns, client, to
}

func (b *bed) run(t *testing.T, c Case) {
	t.Helper()
	ns, _, to := b.endpoints(c)
	out, err := netlab.Exec(context.Background(), ns, b.peer, "send", "-proto", c.Proto, "-to", to.String(),
		"-bytes", fmt.Sprint(requestBytes), "-sport", fmt.Sprint(c.Sport))
	if c.Refused {
		require.ErrorContains(t, fmt.Errorf("%v: %s", err, out), "connection refused", c.Name)
		return
	}
	if c.Denied {
		require.Error(t, err, "%s: the connection went through: %s", c.Name, out)
		return
	}
	require.NoError(t, err, "%s: %s", c.Name, out)
}

// sent is what one flowpeer send of sendAll printed and returned.
type sent struct {
	out string
	err error
}

// sendAll runs flowpeer send for every case at once, as a cluster's
// connections come (both families' halves interleave at the gateway): from
// the case's client to its destination, from its source port, with the
// further arguments args gives.
func (b *bed) sendAll(cases []Case, args func(Case) []string) []sent {
	res := make([]sent, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns, _, to := b.endpoints(c)
			cmd := append([]string{b.peer, "send", "-proto", c.Proto, "-to", to.String(), "-sport", fmt.Sprint(c.Sport)}, args(c)...)
			res[i].out, res[i].err = netlab.Exec(context.Background(), ns, cmd...)
		}()
	}
	wg.Wait()
	return res
}

// check waits until every case has its final row in ClickHouse and compares it.
func (b *bed) check(t *testing.T, cases []Case, timeout time.Duration) {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	deadline := time.Now().Add(timeout)
	pending := cases
	var last map[string][]string
	for len(pending) > 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		last = map[string][]string{}
		var still []Case
		for _, c := range pending {
			_, client, _ := b.endpoints(c)
			rows, err := readRows(conn, c)
			if err != nil || len(rows) == 0 {
				last[c.Name] = []string{fmt.Sprintf("no row yet (%v)", err)}
				still = append(still, c)
				continue
			}
			bad := c.Check(rows[len(rows)-1], client)
			if c.Expect.CorrelationState == "paired" {
				// Exactly one record chain: no unpaired half, no second connection.
				for _, r := range rows {
					if r.CorrelationState != "paired" {
						bad = append(bad, fmt.Sprintf("a %q row besides the paired chain", r.CorrelationState))
					}
				}
			}
			if c.Denied {
				// Reported once, as denied: no row of the connection without the
				// denial, or without the egress policy that admitted it.
				for _, r := range rows {
					if r.IngressPolicy != c.Expect.IngressPolicy || r.CorrelationState == "unpaired" ||
						(c.Expect.EgressPolicy != "" && r.EgressPolicy != c.Expect.EgressPolicy) {
						bad = append(bad, fmt.Sprintf("a %q row with ingress policy %q, egress policy %q besides the denied one",
							r.CorrelationState, r.IngressPolicy, r.EgressPolicy))
					}
				}
				t.Logf("%s: %d rows, states %v", c.Name, len(rows), rowStates(rows))
			}
			if len(bad) > 0 {
				last[c.Name] = bad
				still = append(still, c)
			}
		}
		pending = still
	}
	for _, c := range pending {
		t.Errorf("%s: %s", c.Name, strings.Join(last[c.Name], "; "))
	}
}

func rowStates(rows []Row) []string {
	var s []string
	for _, r := range rows {
		s = append(s, r.CorrelationState)
	}
	return s
}

func readRows(conn clickhouse.Conn, c Case) ([]Row, error) {
	proto := uint8(6)
	if c.Proto == "udp" {
		proto = 17
	}
	rows, err := conn.Query(context.Background(), `SELECT sourceIP, destinationIP, sourceTransportPort, destinationTransportPort, flowType,
		sourcePodName, sourceNodeName, sourceEndpointKind, destinationPodName, destinationNodeName, destinationEndpointKind,
		destinationServicePortName, correlationState, octetTotalCount, reverseOctetTotalCount,
		packetTotalCount, reversePacketTotalCount, proxySnatIP, proxySnatPort, tcpState,
		concat(ingressNetworkPolicyNamespace, '/', ingressNetworkPolicyName, '/', ingressNetworkPolicyRuleName, '/', toString(ingressNetworkPolicyRuleAction)),
		concat(egressNetworkPolicyNamespace, '/', egressNetworkPolicyName, '/', egressNetworkPolicyRuleName, '/', toString(egressNetworkPolicyRuleAction))
		FROM flowtel_e2e.flows WHERE sourceTransportPort = ? AND protocolIdentifier = ? ORDER BY flowEndSeconds, octetTotalCount, reverseOctetTotalCount, timeInserted`, c.Sport, proto)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.SourceIP, &r.DestinationIP, &r.SourcePort, &r.DestinationPort, &r.FlowType,
			&r.SourcePod, &r.SourceNode, &r.SourceKind, &r.DestinationPod, &r.DestinationNode, &r.DstKnd,
			&r.ServicePortName, &r.CorrelationState, &r.OctetTotal, &r.ReverseOctetTotal,
			&r.PacketTotal, &r.ReversePacketTotal, &r.ProxySNATIP, &r.ProxySNATPort, &r.TCPState,
			&r.IngressPolicy, &r.EgressPolicy); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func freePort(t testing.TB) int {
	t.Helper()
	p, err := collector.FreePort()
	require.NoError(t, err)
	return p
}

// checkSinks compares, for every case, the final record at the IPFIX and OTLP
// sinks with the final ClickHouse row (check must have passed): the same flow
// type, Pods, Nodes, Service, addresses and counters. At the OTLP sink, which
// carries the correlation state, a case that pairs has no other state.
func (b *bed) checkSinks(t *testing.T, cases []Case, timeout time.Duration) {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	want := map[string]Row{}
	for _, c := range cases {
		rows, err := readRows(conn, c)
		require.NoError(t, err)
		require.NotEmpty(t, rows, c.Name)
		want[c.Name] = rows[len(rows)-1]
	}
	type sink struct {
		name    string
		records func() ([]sinkRecord, error)
	}
	var sinks []sink
	if b.ipfix != nil {
		sinks = append(sinks, sink{"IPFIX", func() ([]sinkRecord, error) { return b.ipfix.Records(), nil }})
	}
	if b.otlp != nil {
		sinks = append(sinks, sink{"OTLP", b.otlp.Records})
	}
	for _, s := range sinks {
		deadline := time.Now().Add(timeout)
		var last map[string][]string
		for {
			recs, err := s.records()
			require.NoError(t, err)
			last = map[string][]string{}
			for _, c := range cases {
				r, _, ok := final(recs, c)
				if !ok {
					last[c.Name] = []string{"no record"}
					continue
				}
				bad := r.sameAs(want[c.Name])
				if r.kindsKnown && c.Expect.CorrelationState == "paired" {
					for _, o := range recs {
						if o.SourcePort == c.Sport && o.Protocol == c.protocol() && o.CorrelationState != "paired" {
							bad = append(bad, fmt.Sprintf("a %q record besides the paired chain", o.CorrelationState))
						}
					}
				}
				if len(bad) > 0 {
					last[c.Name] = bad
				}
			}
			if len(last) == 0 || time.Now().After(deadline) {
				t.Logf("%s sink: %d records; %d of %d cases as in ClickHouse", s.name, len(recs), len(cases)-len(last), len(cases))
				break
			}
			time.Sleep(time.Second)
		}
		for _, c := range cases {
			if bad, ok := last[c.Name]; ok {
				t.Errorf("%s sink, %s: %s", s.name, c.Name, strings.Join(bad, "; "))
			}
		}
	}
}

// allowNodeReads lets ServiceAccount namespace/name get, list and watch
// Nodes, as the shipped gateway may (its binding to the node ClusterRole).
func allowNodeReads(t testing.TB, cp *controlplane.ControlPlane, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	role := "flowtel-e2e-node-reader"
	_, err := cp.Admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: name}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}
