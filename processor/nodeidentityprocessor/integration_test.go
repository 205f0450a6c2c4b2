//go:build integration

package nodeidentityprocessor

import (
	"context"
	"fmt"

	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/internal/senderauth"
	"github.com/flowtel/flowtel/processor/nodeidentityprocessor/internal/metadata"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

// lab is a real API server with two Nodes, the node collectors'
// ServiceAccount and one of their Pods on node-a.
type lab struct {
	t   *testing.T
	cp  *controlplane.ControlPlane
	pod *corev1.Pod
}

func newLab(t *testing.T) *lab {
	cp := controlplane.Start(t)
	ctx := context.Background()
	cp.ServiceAccount(t, "flowtel", "flowtel-node")
	cp.ServiceAccount(t, "default", "app")
	// Each Node with an InternalIP and a podCIDR, as the kubelet and the
	// node IPAM controller set them: its addresses (decision D1).
	for i, n := range []string{"node-a", "node-b"} {
		created, err := cp.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.244.%d.0/24", i+1), PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", i+1)}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.0.%d", i+1)}}
		_, err = cp.Admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	// The gateway's read-only ClusterRole as shipped (kustomize's; Helm and
	// the Operator bind the gateway to the same rules): node_identity lists
	// and watches Nodes with it.
	cp.ApplyClusterRoles(t, "../../deploy/kubernetes/base/node/clusterrole.yaml")
	_, err := cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "flowtel-gateway"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "flowtel-node"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "flowtel", Name: "flowtel-gateway"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	l := &lab{t: t, cp: cp}
	l.pod = l.podOn("flowtel", "collector", "flowtel-node", "node-a")
	return l
}

func (l *lab) podOn(ns, name, sa, node string) *corev1.Pod {
	pod, err := l.cp.Admin.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa, Containers: []corev1.Container{{Name: "c", Image: "collector"}}}}, metav1.CreateOptions{})
	require.NoError(l.t, err)
	return pod
}

// token is a TokenRequest token of ns/sa for audience, bound to pod (nil: unbound).
func (l *lab) token(ns, sa, audience string, pod *corev1.Pod) string {
	spec := authv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr(int64(3600))}
	if pod != nil {
		spec.BoundObjectRef = &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := l.cp.Admin.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	require.NoError(l.t, err)
	return tr.Status.Token
}

func ptr[T any](v T) *T { return &v }

// gateway starts the processor as the gateway runs it: its own
// ServiceAccount, bound to system:auth-delegator, reviews the tokens.
func (l *lab) gateway(mut func(*Config)) (processor.Logs, *consumertest.LogsSink, *componenttest.Telemetry) {
	cfg := createDefaultConfig()
	cfg.AuthType, cfg.KubeConfig = "kubeConfig", l.cp.DelegatingServiceAccount(l.t, "flowtel", "flowtel-gateway", false)
	cfg.ServiceAccounts = []string{"flowtel/flowtel-node"}
	if mut != nil {
		mut(cfg)
	}
	tel := componenttest.NewTelemetry()
	l.t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), set, cfg, sink)
	require.NoError(l.t, err)
	require.NoError(l.t, p.Start(context.Background(), componenttest.NewNopHost()))
	l.t.Cleanup(func() { require.NoError(l.t, p.Shutdown(context.Background())) })
	return p, sink, tel
}

// requestDeadline bounds every request a test sends, and so the
// TokenReview it makes: no test waits on the API server forever.
const requestDeadline = 30 * time.Second

// sent is the context of a request that carried token, as the otlp receiver
// with include_metadata makes it, ending with the test or after
// requestDeadline.
func sent(t *testing.T, token string) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), requestDeadline)
	t.Cleanup(cancel)
	md := map[string][]string{}
	if token != "" {
		md["authorization"] = []string{"Bearer " + token}
	}
	return client.NewContext(ctx, client.Info{Metadata: client.NewMetadata(md)})
}

// record is a flow record reported by reporter, whose source (the
// reporter's side) is on sourceNode.
type record struct{ reporter, sourceNode string }

// logs are node collector records in the attribute form, under the
// resource of resourceNode.
func logs(resourceNode string, rs ...record) plog.Logs {
	return encoded(attrcodec.Encode, resourceNode, rs...)
}

// encoded are node collector records written by encode (the attribute or
// the compact form), under the resource of resourceNode.
func encoded(encode func(*flowrecord.Record, plog.LogRecord), resourceNode string, rs ...record) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(resourceNodeName, resourceNode)
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i, r := range rs {
		encode(&flowrecord.Record{
			Start: time.Now(), End: time.Now(), Protocol: 6,
			Source:      flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.1"), Port: uint16(1000 + i), NodeName: r.sourceNode},
			Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.1.1"), Port: 80},
			Reporter:    flowrecord.Reporter{NodeName: r.reporter, Side: flowrecord.SideSource},
		}, lrs.AppendEmpty())
	}
	return ld
}

// TestNodeIdentity: against the real API server, the node collector of
// node-a (its projected token, bound to its Pod on node-a) gets its own
// Node's records through; records naming node-b — as reporter, as the
// reporter-side endpoint's Node, or under a node-b resource — are refused and
// counted other_node, and the rest of the request passes. The token is
// reviewed once for many requests.
func TestNodeIdentity(t *testing.T) {
	l := newLab(t)
	p, sink, tel := l.gateway(nil)
	tok := l.token("flowtel", "flowtel-node", defaultAudience, l.pod)

	own := record{"node-a", "node-a"}
	require.NoError(t, p.ConsumeLogs(sent(t, tok), logs("node-a", own, record{"node-b", "node-b"}, record{"node-a", "node-b"}, own)))
	require.Equal(t, 2, sink.LogRecordCount(), "node-a's two own records passed")
	for _, ld := range sink.AllLogs() {
		var r flowrecord.Record
		lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		for i := 0; i < lr.Len(); i++ {
			require.NoError(t, attrcodec.Decode(lr.At(i), &r))
			assert.Equal(t, "node-a", r.Reporter.NodeName)
			assert.Equal(t, "node-a", r.Source.NodeName)
		}
	}
	// A whole request under another Node's resource: refused, an error back.
	err := p.ConsumeLogs(sent(t, tok), logs("node-b", record{"node-b", "node-b"}))
	require.NoError(t, err, "refused records are counted; an authenticated sender gets no error")
	assert.Equal(t, 2, sink.LogRecordCount())
	assert.Equal(t, int64(2), counter(t, tel, accepted, ""))
	assert.Equal(t, int64(3), counter(t, tel, refused, "other_node"))
	assert.Equal(t, int64(1), counter(t, tel, reviews, ""), "the token reviewed once, then cached")
}

// TestNodeIdentityRefusesSenders: a request without a token, with a token
// for another audience, of another ServiceAccount, or not bound to a Pod is
// refused whole with a permanent error, counted by reason, and nothing of it
// passes.
func TestNodeIdentityRefusesSenders(t *testing.T) {
	l := newLab(t)
	p, sink, tel := l.gateway(nil)
	appPod := l.podOn("default", "app", "app", "node-a")
	for name, tc := range map[string]struct{ token, reason string }{
		"without a token":                     {"", "no_token"},
		"for the API server":                  {l.token("flowtel", "flowtel-node", "https://kubernetes.default.svc.cluster.local", l.pod), "invalid_token"},
		"garbage":                             {"not-a-token", "invalid_token"},
		"of an application Pod":               {l.token("default", "app", defaultAudience, appPod), "not_allowed"},
		"of the node collectors' SA, unbound": {l.token("flowtel", "flowtel-node", defaultAudience, nil), "unbound_token"},
	} {
		before := counter(t, tel, refused, tc.reason)
		err := p.ConsumeLogs(sent(t, tc.token), logs("node-a", record{"node-a", "node-a"}, record{"node-a", "node-a"}))
		require.Error(t, err, name)
		assert.True(t, consumererror.IsPermanent(err), "%s: %v is not permanent", name, err)
		assert.Equal(t, int64(2), counter(t, tel, refused, tc.reason)-before, "%s: refused records counted %s", name, tc.reason)
		t.Logf("%s: %v", name, err)
	}
	assert.Zero(t, sink.LogRecordCount())
	assert.Zero(t, counter(t, tel, accepted, ""))
}

// TestNodeIdentityPodOnAnotherNode: the same ServiceAccount's token from a
// Pod on node-b speaks for node-b only.
func TestNodeIdentityPodOnAnotherNode(t *testing.T) {
	l := newLab(t)
	p, sink, tel := l.gateway(nil)
	onB := l.token("flowtel", "flowtel-node", defaultAudience, l.podOn("flowtel", "collector-b", "flowtel-node", "node-b"))
	require.NoError(t, p.ConsumeLogs(sent(t, onB), logs("node-b", record{"node-b", "node-b"})))
	require.NoError(t, p.ConsumeLogs(sent(t, onB), logs("node-b", record{"node-a", ""})))
	assert.Equal(t, 1, sink.LogRecordCount())
	assert.Equal(t, int64(1), counter(t, tel, refused, "other_node"))
}

// TestNodeIdentityCompact: the shipped node configuration sends the compact
// form; its records are checked as the attribute form's are, not refused as
// undecodable. A source half whose source is on no Node claims no endpoint
// of node-a: refused not_local.
func TestNodeIdentityCompact(t *testing.T) {
	l := newLab(t)
	p, sink, tel := l.gateway(nil)
	tok := l.token("flowtel", "flowtel-node", defaultAudience, l.pod)
	require.NoError(t, p.ConsumeLogs(sent(t, tok), encoded(compactcodec.Encode, "node-a",
		record{"node-a", "node-a"}, record{"node-b", "node-b"}, record{"node-a", ""})))
	assert.Equal(t, 1, sink.LogRecordCount())
	assert.Equal(t, int64(1), counter(t, tel, accepted, ""))
	assert.Equal(t, int64(1), counter(t, tel, refused, "other_node"))
	assert.Equal(t, int64(1), counter(t, tel, refused, "not_local"))
	assert.Zero(t, counter(t, tel, refused, "undecodable"))
	lr := sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.True(t, compactcodec.IsCompact(lr), "passed on in the form it came")
}

// TestNodeIdentityAntreaAgents: records the antrea_flows receiver marked
// (an agent it authenticated by certificate) pass unchecked and are counted
// so; the same mark sent as a request header is not a mark.
func TestNodeIdentityAntreaAgents(t *testing.T) {
	l := newLab(t)
	p, sink, tel := l.gateway(nil)
	ctx := senderauth.WithAntreaAgent(context.Background(), "tcp")
	require.NoError(t, p.ConsumeLogs(ctx, logs("node-b", record{"node-b", "node-b"}, record{"node-a", "node-a"})))
	assert.Equal(t, 2, sink.LogRecordCount())
	assert.Equal(t, int64(2), counter(t, tel, "otelcol_processor_node_identity_records_unchecked", ""))

	forged := client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{
		senderauth.AttrSender: {"antrea-agent"}})})
	err := p.ConsumeLogs(forged, logs("node-b", record{"node-b", "node-b"}))
	require.Error(t, err)
	assert.Equal(t, int64(1), counter(t, tel, refused, "no_token"))
	assert.Equal(t, 2, sink.LogRecordCount())
}

// TestNodeIdentityChecksEveryEndpoint: with node-a's real token, the
// records k8s_flow writes on node-a for a NodePort connection relayed to a
// third Node (the destination half keyed by what reached node-a, and its
// relay leg) and an intra-Node record pass; records that claim another
// Node's Pod on a side the reporter's check used to skip (the destination
// of an intra-Node record, the endpoint of a DNATed destination half whose
// client is local), a relay leg of a connection between two other Nodes,
// and a relay leg carrying another connection's key are refused, each
// counted by reason, and nothing else is lost.
func TestNodeIdentityChecksEveryEndpoint(t *testing.T) {
	l := newLab(t)
	p, sink, tel := l.gateway(nil)
	tok := l.token("flowtel", "flowtel-node", defaultAudience, l.pod)

	pod := func(addr, node string) flowrecord.Endpoint {
		return flowrecord.Endpoint{Address: netip.MustParseAddr(addr), Port: 8080, Kind: flowrecord.EndpointPod, NodeName: node}
	}
	podA, podA2, podB, podC := pod("10.244.1.10", "node-a"), pod("10.244.1.11", "node-a"), pod("10.244.2.10", "node-b"), pod("10.244.3.10", "node-c")
	rec := func(side flowrecord.Side, src, dst flowrecord.Endpoint, nodePort bool) *flowrecord.Record {
		r := &flowrecord.Record{Start: time.Now(), End: time.Now(), Protocol: 6, Source: src, Destination: dst,
			Reporter: flowrecord.Reporter{NodeName: "node-a", Side: side}}
		if nodePort {
			r.OriginalDestinationAddress, r.OriginalDestinationPort = netip.MustParseAddr("192.168.0.1"), 30080
		}
		if side == flowrecord.SideRelay {
			r.ProxySNATAddress, r.ProxySNATPort = netip.MustParseAddr("192.168.0.1"), 40022
		}
		r.Key = r.CorrelationKey()
		return r
	}
	forgedKey := rec(flowrecord.SideRelay, podB, podC, true)
	forgedKey.Key = "6|10.244.2.10:8080|10.244.3.10:8080" // node-b → node-c, direct
	// A relay leg keyed by node-b's address as its SNAT address: it would
	// fold away node-b's own connection 192.168.0.2:40022 → node-c's Pod.
	forgedSNAT := rec(flowrecord.SideRelay, podB, podC, true)
	forgedSNAT.ProxySNATAddress = netip.MustParseAddr("192.168.0.2")
	forgedSNAT.Key = forgedSNAT.CorrelationKey()
	// node-a's host (a Node endpoint) by its podCIDR gateway: passes; at
	// node-b's address: not node-a's.
	hostA := flowrecord.Endpoint{Address: netip.MustParseAddr("10.244.1.1"), Port: 5000, Kind: flowrecord.EndpointNode, NodeName: "node-a"}
	hostAtB := hostA
	hostAtB.Address = netip.MustParseAddr("192.168.0.2")

	for _, encode := range []func(*flowrecord.Record, plog.LogRecord){attrcodec.Encode, compactcodec.Encode} {
		before := counter(t, tel, accepted, "")
		passed := sink.LogRecordCount()
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr(resourceNodeName, "node-a")
		lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
		for _, r := range []*flowrecord.Record{
			rec(flowrecord.SideBoth, podA, podA2, false),      // passes
			rec(flowrecord.SideDestination, podB, podC, true), // NodePort relayed to node-c: passes
			rec(flowrecord.SideRelay, podB, podC, true),       // its relay leg: passes
			rec(flowrecord.SideBoth, podA, podC, false),       // other_node (node-c as destination)
			rec(flowrecord.SideDestination, podA, podC, true), // other_node (a local client: not relayed)
			rec(flowrecord.SideRelay, podB, podC, false),      // not_local (not DNATed)
			rec(flowrecord.SideRelay, podA, podC, true),       // not_local (a local client)
			forgedKey,  // key_mismatch
			forgedSNAT, // not_node_address
			rec(flowrecord.SideSource, hostA, podB, false),   // passes
			rec(flowrecord.SideSource, hostAtB, podB, false), // not_node_address
		} {
			encode(r, lrs.AppendEmpty())
		}
		require.NoError(t, p.ConsumeLogs(sent(t, tok), ld))
		assert.Equal(t, 4, sink.LogRecordCount()-passed)
		assert.Equal(t, int64(4), counter(t, tel, accepted, "")-before)
	}
	assert.Equal(t, int64(4), counter(t, tel, refused, "other_node"))
	assert.Equal(t, int64(4), counter(t, tel, refused, "not_local"))
	assert.Equal(t, int64(2), counter(t, tel, refused, "key_mismatch"))
	assert.Equal(t, int64(4), counter(t, tel, refused, "not_node_address"))
	assert.Zero(t, counter(t, tel, refused, "undecodable"))
	assert.Zero(t, counter(t, tel, refused, "nodes_unavailable"))
}
