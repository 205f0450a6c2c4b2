package k8sindex

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/netpol"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// policyWorld is an Index with NetworkPolicies and a clock the test moves.
type policyWorld struct {
	ix  *Index
	now time.Time
}

func newPolicyWorld(t *testing.T) *policyWorld {
	t.Helper()
	w := &policyWorld{now: t0}
	w.ix = New(Options{AllPods: true, NetworkPolicies: true, Now: func() time.Time { return w.now }})
	n := testNode("node-1", "10.0.9.0/24")
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.0.1"}}
	w.ix.upsertNode(n)
	w.namespace("web", "team", "web")
	w.namespace("cli", "team", "cli")
	w.namespace("other", "team", "other")
	w.pod("web", "web-1", "10.0.0.10", map[string]string{"app": "web"},
		corev1.ContainerPort{Name: "http", ContainerPort: 8080}, corev1.ContainerPort{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP})
	w.pod("web", "db", "10.0.0.20", map[string]string{"app": "db"})
	w.pod("cli", "client", "10.0.1.1", map[string]string{"app": "client"})
	w.pod("other", "client", "10.0.2.1", map[string]string{"app": "client"})
	return w
}

func (w *policyWorld) namespace(name string, kv ...string) {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	w.ix.upsertNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}})
}

func (w *policyWorld) pod(ns, name, ip string, labels map[string]string, ports ...corev1.ContainerPort) {
	in := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: labels,
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
	o, _ := stripPod(true, true)(in)
	w.ix.upsertPod(o.(*podObject))
}

// policy adds (or, same namespace and name, updates) a NetworkPolicy.
func (w *policyWorld) policy(ns, name string, spec networkingv1.NetworkPolicySpec) {
	w.ix.upsertPolicy(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(w.now)},
		Spec:       spec,
	})
}

// verdicts evaluates a connection src → dst:port started at start.
func (w *policyWorld) verdicts(proto uint8, src, dst string, port uint16, start time.Time) (in, eg netpol.Verdict) {
	r := flowrecord.Record{Protocol: proto, Start: start,
		Source:      flowrecord.Endpoint{Address: netip.MustParseAddr(src), Port: 40000},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr(dst), Port: port}}
	v := w.ix.Read()
	defer v.Done()
	return v.PolicyVerdict(&r, true), v.PolicyVerdict(&r, false)
}

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func tcpPort(p int) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(int32(p))
	return networkingv1.NetworkPolicyPort{Port: &v}
}

func namedPort(name string, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	v := intstr.FromString(name)
	return networkingv1.NetworkPolicyPort{Port: &v, Protocol: &proto}
}

func rangePort(from, to int) networkingv1.NetworkPolicyPort {
	p := tcpPort(from)
	end := int32(to)
	p.EndPort = &end
	return p
}

var (
	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	denyAll     = networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly}
)

func from(peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer { return peers }

// want is one direction's expected verdict: outcome, policy name, rule name.
type want struct {
	outcome      netpol.Outcome
	policy, rule string
}

func got(v netpol.Verdict) want {
	w := want{outcome: v.Outcome, rule: v.RuleName}
	if v.Policy != nil {
		w.policy = v.Policy.Name
	}
	return w
}

const (
	web1, db, client, otherClient = "10.0.0.10", "10.0.0.20", "10.0.1.1", "10.0.2.1"
	tcp, udp, icmp                = 6, 17, 1
)

// TestPolicyVerdicts holds the evaluator to the NetworkPolicy semantics.
func TestPolicyVerdicts(t *testing.T) {
	allowClient := networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web"), PolicyTypes: ingressOnly,
		Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "db")})},
			{From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "cli"), PodSelector: sel("app", "client")}),
				Ports: []networkingv1.NetworkPolicyPort{tcpPort(8080)}},
		}}
	ipBlock := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: from(networkingv1.NetworkPolicyPeer{
		IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24", Except: []string{"192.0.2.9/32"}}})}}}
	named := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{namedPort("http", corev1.ProtocolTCP), namedPort("dns", corev1.ProtocolUDP)}}}}
	endPort := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{rangePort(8000, 8100)}}}}
	egressToDB := networkingv1.NetworkPolicySpec{PolicyTypes: egressOnly, Egress: []networkingv1.NetworkPolicyEgressRule{
		{To: from(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "198.51.100.0/24"}})},
		{To: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "web"), PodSelector: sel("app", "db")})},
	}}
	implicitEgress := networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{
		{Ports: []networkingv1.NetworkPolicyPort{namedPort("http", corev1.ProtocolTCP)}}}}
	allowAll := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}
	sameNamespace := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
		{From: from(networkingv1.NetworkPolicyPeer{PodSelector: sel()})}}}
	anyNamespace := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
		{From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel()})}}}
	podPorts := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{tcpPort(8080)}}}}

	type policy struct {
		ns, name string
		spec     networkingv1.NetworkPolicySpec
	}
	none := want{}
	for _, tc := range []struct {
		name     string
		policies []policy
		proto    uint8
		src, dst string
		port     uint16
		ingress  want
		egress   want
	}{
		{name: "no policy: both sides unisolated", proto: tcp, src: client, dst: web1, port: 8080},
		{name: "default deny names the isolating policy", policies: []policy{{"web", "deny-all", denyAll}},
			proto: tcp, src: client, dst: web1, port: 8080, ingress: want{netpol.Denied, "deny-all", ""}},
		{name: "namespaceSelector and podSelector allow", policies: []policy{{"web", "allow-client", allowClient}},
			proto: tcp, src: client, dst: web1, port: 8080, ingress: want{netpol.Allowed, "allow-client", "ingress-1"}},
		{name: "same labels in a Namespace the selector does not match", policies: []policy{{"web", "allow-client", allowClient}},
			proto: tcp, src: otherClient, dst: web1, port: 8080, ingress: want{netpol.Denied, "allow-client", ""}},
		{name: "a rule's port does not match", policies: []policy{{"web", "allow-client", allowClient}},
			proto: tcp, src: client, dst: web1, port: 9090, ingress: want{netpol.Denied, "allow-client", ""}},
		{name: "podSelector alone is the policy's Namespace", policies: []policy{{"web", "allow-client", allowClient}},
			proto: tcp, src: db, dst: web1, port: 9090, ingress: want{netpol.Allowed, "allow-client", "ingress-0"}},
		{name: "policy selecting other Pods leaves the Pod unisolated", policies: []policy{{"web", "allow-client", allowClient}},
			proto: tcp, src: client, dst: db, port: 5432},
		{name: "ipBlock admits", policies: []policy{{"web", "ext", ipBlock}},
			proto: tcp, src: "192.0.2.7", dst: web1, port: 80, ingress: want{netpol.Allowed, "ext", "ingress-0"}},
		{name: "ipBlock except", policies: []policy{{"web", "ext", ipBlock}},
			proto: tcp, src: "192.0.2.9", dst: web1, port: 80, ingress: want{netpol.Denied, "ext", ""}},
		{name: "ipBlock outside", policies: []policy{{"web", "ext", ipBlock}},
			proto: tcp, src: client, dst: web1, port: 80, ingress: want{netpol.Denied, "ext", ""}},
		{name: "named port", policies: []policy{{"web", "named", named}},
			proto: tcp, src: client, dst: web1, port: 8080, ingress: want{netpol.Allowed, "named", "ingress-0"}},
		{name: "named port, other number", policies: []policy{{"web", "named", named}},
			proto: tcp, src: client, dst: web1, port: 9090, ingress: want{netpol.Denied, "named", ""}},
		{name: "named UDP port", policies: []policy{{"web", "named", named}},
			proto: udp, src: client, dst: web1, port: 53, ingress: want{netpol.Allowed, "named", "ingress-0"}},
		{name: "named port, protocol differs", policies: []policy{{"web", "named", named}},
			proto: tcp, src: client, dst: web1, port: 53, ingress: want{netpol.Denied, "named", ""}},
		{name: "named port the Pod does not have", policies: []policy{{"web", "named", named}},
			proto: tcp, src: client, dst: db, port: 8080, ingress: want{netpol.Denied, "named", ""}},
		{name: "endPort range", policies: []policy{{"web", "range", endPort}},
			proto: tcp, src: client, dst: web1, port: 8100, ingress: want{netpol.Allowed, "range", "ingress-0"}},
		{name: "endPort range, above", policies: []policy{{"web", "range", endPort}},
			proto: tcp, src: client, dst: web1, port: 8101, ingress: want{netpol.Denied, "range", ""}},
		{name: "ports default to TCP", policies: []policy{{"web", "range", endPort}},
			proto: udp, src: client, dst: web1, port: 8080, ingress: want{netpol.Denied, "range", ""}},
		{name: "egress-only policy admits", policies: []policy{{"cli", "to-db", egressToDB}},
			proto: tcp, src: client, dst: db, port: 5432, egress: want{netpol.Allowed, "to-db", "egress-1"}},
		{name: "egress-only policy denies, ingress stays unisolated", policies: []policy{{"cli", "to-db", egressToDB}},
			proto: tcp, src: client, dst: web1, port: 8080, egress: want{netpol.Denied, "to-db", ""}},
		{name: "egress ipBlock to an external address", policies: []policy{{"cli", "to-db", egressToDB}},
			proto: udp, src: client, dst: "198.51.100.3", port: 53, egress: want{netpol.Allowed, "to-db", "egress-0"}},
		{name: "egress rules without policyTypes isolate egress; named port of the destination Pod", policies: []policy{{"cli", "web", implicitEgress}},
			proto: tcp, src: client, dst: web1, port: 8080, egress: want{netpol.Allowed, "web", "egress-0"}},
		{name: "egress named port to an external address matches nothing", policies: []policy{{"cli", "web", implicitEgress}},
			proto: tcp, src: client, dst: "198.51.100.3", port: 8080, egress: want{netpol.Denied, "web", ""}},
		{name: "both directions", policies: []policy{{"cli", "web", implicitEgress}, {"web", "allow-client", allowClient}},
			proto: tcp, src: client, dst: web1, port: 8080,
			ingress: want{netpol.Allowed, "allow-client", "ingress-1"}, egress: want{netpol.Allowed, "web", "egress-0"}},
		{name: "several admit: the first by name", policies: []policy{{"web", "c-all", allowAll}, {"web", "b-named", named}, {"web", "a-deny", denyAll}},
			proto: tcp, src: client, dst: web1, port: 8080, ingress: want{netpol.Allowed, "b-named", "ingress-0"}},
		{name: "several isolate, none admits: the first by name", policies: []policy{{"web", "z-named", named}, {"web", "m-deny", denyAll}},
			proto: tcp, src: client, dst: web1, port: 1, ingress: want{netpol.Denied, "m-deny", ""}},
		{name: "empty podSelector peer: the policy's Namespace only", policies: []policy{{"web", "same-ns", sameNamespace}},
			proto: tcp, src: client, dst: web1, port: 8080, ingress: want{netpol.Denied, "same-ns", ""}},
		{name: "empty namespaceSelector peer: every Pod", policies: []policy{{"web", "any-ns", anyNamespace}},
			proto: tcp, src: client, dst: web1, port: 8080, ingress: want{netpol.Allowed, "any-ns", "ingress-0"}},
		{name: "a Node is no Pod for selectors", policies: []policy{{"web", "any-ns", anyNamespace}},
			proto: tcp, src: "10.1.0.1", dst: web1, port: 8080, ingress: want{netpol.Denied, "any-ns", ""}},
		{name: "a Node destination has no policy", policies: []policy{{"cli", "web", implicitEgress}, {"web", "deny-all", denyAll}},
			proto: tcp, src: "10.1.0.1", dst: "10.0.9.1", port: 10250, egress: none},
		{name: "rule without ports admits ICMP", policies: []policy{{"web", "all", allowAll}},
			proto: icmp, src: client, dst: web1, ingress: want{netpol.Allowed, "all", "ingress-0"}},
		{name: "rule with ports does not admit ICMP", policies: []policy{{"web", "ports", podPorts}},
			proto: icmp, src: client, dst: web1, ingress: want{netpol.Denied, "ports", ""}},
		{name: "unknown Pod in a podCIDR: selectors undetermined", policies: []policy{{"web", "allow-client", allowClient}},
			proto: tcp, src: "10.0.9.5", dst: web1, port: 8080, ingress: want{netpol.Undetermined, "allow-client", ""}},
		{name: "unknown Pod in a podCIDR: ipBlock decides", policies: []policy{{"web", "ext", ipBlock}},
			proto: tcp, src: "10.0.9.5", dst: web1, port: 8080, ingress: want{netpol.Denied, "ext", ""}},
		{name: "unknown Pod in a podCIDR: a rule for every peer admits", policies: []policy{{"web", "ports", podPorts}},
			proto: tcp, src: "10.0.9.5", dst: web1, port: 8080, ingress: want{netpol.Allowed, "ports", "ingress-0"}},
		{name: "unknown destination Pod: named port undetermined", policies: []policy{{"cli", "web", implicitEgress}},
			proto: tcp, src: client, dst: "10.0.9.5", port: 8080, egress: want{netpol.Undetermined, "web", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newPolicyWorld(t)
			for _, p := range tc.policies {
				w.policy(p.ns, p.name, p.spec)
			}
			w.now = t0.Add(time.Second)
			in, eg := w.verdicts(tc.proto, tc.src, tc.dst, tc.port, w.now)
			assert.Equal(t, tc.ingress, got(in), "ingress")
			assert.Equal(t, tc.egress, got(eg), "egress")
		})
	}
}

// TestPolicyHistory: a connection is evaluated against the policies and
// labels of its start, within the bounded history.
func TestPolicyHistory(t *testing.T) {
	allowFromClients := func(port int) networkingv1.NetworkPolicySpec {
		return networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "cli"), PodSelector: sel("app", "client")}),
			Ports: []networkingv1.NetworkPolicyPort{tcpPort(port)}}}}
	}
	allowed := want{netpol.Allowed, "clients", "ingress-0"}
	denied := want{netpol.Denied, "clients", ""}
	ingressAt := func(w *policyWorld, start time.Time) want {
		in, _ := w.verdicts(tcp, client, web1, 8080, start)
		return got(in)
	}
	before, t1, after := t0.Add(30*time.Second), t0.Add(time.Minute), t0.Add(90*time.Second)

	t.Run("policy created after the connection started", func(t *testing.T) {
		w := newPolicyWorld(t)
		w.now = t1
		w.policy("web", "deny", denyAll)
		w.now = after
		assert.Equal(t, want{}, ingressAt(w, before))
		assert.Equal(t, want{netpol.Denied, "deny", ""}, ingressAt(w, after))
	})
	t.Run("policy changed after the connection started", func(t *testing.T) {
		w := newPolicyWorld(t)
		w.policy("web", "clients", allowFromClients(8080))
		w.now = t1
		w.policy("web", "clients", allowFromClients(9090))
		w.now = after
		assert.Equal(t, allowed, ingressAt(w, before))
		assert.Equal(t, denied, ingressAt(w, after))
	})
	t.Run("policy deleted after the connection started", func(t *testing.T) {
		w := newPolicyWorld(t)
		w.policy("web", "clients", allowFromClients(9090))
		w.now = t1
		w.ix.deletePolicy("web", "uid-clients")
		w.now = after
		assert.Equal(t, denied, ingressAt(w, before))
		assert.Equal(t, want{}, ingressAt(w, after))
		// Past the retention the deleted policy is gone from the history.
		w.now = t1.Add(DefaultDeletedPodRetention + time.Second)
		w.ix.upsertNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "purge-trigger"}})
		assert.Equal(t, want{}, ingressAt(w, before))
	})
	t.Run("Pod label changed after the connection started", func(t *testing.T) {
		w := newPolicyWorld(t)
		w.policy("web", "clients", allowFromClients(8080))
		w.now = t1
		w.pod("cli", "client", client, map[string]string{"app": "other"})
		w.now = after
		assert.Equal(t, allowed, ingressAt(w, before))
		assert.Equal(t, denied, ingressAt(w, after))
	})
	t.Run("Namespace label changed after the connection started", func(t *testing.T) {
		w := newPolicyWorld(t)
		w.policy("web", "clients", allowFromClients(8080))
		w.now = t1
		w.namespace("cli", "team", "gone")
		w.now = after
		assert.Equal(t, allowed, ingressAt(w, before))
		assert.Equal(t, denied, ingressAt(w, after))
	})
	t.Run("metadata-only update keeps the version", func(t *testing.T) {
		w := newPolicyWorld(t)
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "clients", UID: "uid-clients", Generation: 1,
			CreationTimestamp: metav1.NewTime(t0)}, Spec: allowFromClients(8080)}
		w.ix.upsertPolicy(np)
		for i := range 2 * maxVersions {
			w.now = t0.Add(time.Duration(i+1) * time.Second)
			np.Labels = map[string]string{"rev": w.now.String()}
			w.ix.upsertPolicy(np)
		}
		assert.Len(t, w.ix.pol.policies["web"]["uid-clients"].versions, 1)
		assert.Equal(t, allowed, ingressAt(w, t0))
	})
	t.Run("history is bounded", func(t *testing.T) {
		w := newPolicyWorld(t)
		for i := range 3 * maxVersions {
			w.now = t0.Add(time.Duration(i) * time.Second)
			w.policy("web", "clients", allowFromClients(8000+i))
			w.pod("cli", "client", client, map[string]string{"app": "client", "rev": w.now.String()})
		}
		assert.Len(t, w.ix.pol.policies["web"]["uid-clients"].versions, maxVersions)
		p := w.ix.podAt(netip.MustParseAddr(client), w.now)
		assert.Len(t, p.oldLabels, maxVersions)
		// Older than the oldest kept version: no policy is known then.
		in, _ := w.verdicts(tcp, client, web1, 8000, t0)
		assert.Equal(t, want{}, got(in))
	})
}

// TestVerdictFields maps verdicts onto the record's policy fields.
func TestVerdictFields(t *testing.T) {
	p := &netpol.Policy{Namespace: "web", Name: "clients", UID: "u1"}
	allow := netpol.Verdict{Outcome: netpol.Allowed, Policy: p, RuleName: "ingress-0"}
	deny := netpol.Verdict{Outcome: netpol.Denied, Policy: p}
	undetermined := netpol.Verdict{Outcome: netpol.Undetermined, Policy: p}
	k8s := flowrecord.PolicyTypeK8sNetworkPolicy
	assert.Equal(t, flowrecord.Policy{Type: k8s, Namespace: "web", Name: "clients", UID: "u1", RuleName: "ingress-0", RuleAction: flowrecord.RuleActionAllow}, allow.Observed())
	assert.Equal(t, flowrecord.Policy{}, deny.Observed())
	assert.Equal(t, flowrecord.Policy{}, undetermined.Observed())
	assert.Equal(t, flowrecord.Policy{}, netpol.Verdict{}.Observed())
	assert.Equal(t, flowrecord.Policy{Type: k8s, Namespace: "web", Name: "clients", UID: "u1", RuleAction: flowrecord.RuleActionDrop}, deny.Denied(flowrecord.RuleActionDrop))
	assert.Equal(t, flowrecord.RuleActionReject, deny.Denied(flowrecord.RuleActionReject).RuleAction)
	assert.Equal(t, allow.Observed(), allow.Denied(flowrecord.RuleActionDrop))
	assert.Equal(t, flowrecord.Policy{}, undetermined.Denied(flowrecord.RuleActionDrop))
}

// TestPolicyVerdictSNAT: an ingress peer masqueraded on the way is matched
// by its SNAT address (here the Node's), as the destination's datapath sees
// it; the egress side keeps the real client.
func TestPolicyVerdictSNAT(t *testing.T) {
	w := newPolicyWorld(t)
	w.policy("web", "from-node", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
		{From: from(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.1.0.1/32"}})}}})
	w.policy("cli", "web", networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}})
	w.now = t0.Add(time.Second)
	r := flowrecord.Record{Protocol: tcp, Start: w.now,
		Source:           flowrecord.Endpoint{Address: netip.MustParseAddr(client), Port: 40000},
		Destination:      flowrecord.Endpoint{Address: netip.MustParseAddr(web1), Port: 8080},
		ProxySNATAddress: netip.MustParseAddr("10.1.0.1"), ProxySNATPort: 61000}
	v := w.ix.Read()
	defer v.Done()
	assert.Equal(t, want{netpol.Allowed, "from-node", "ingress-0"}, got(v.PolicyVerdict(&r, true)))
	assert.Equal(t, want{netpol.Allowed, "web", "egress-0"}, got(v.PolicyVerdict(&r, false)))
	r.ProxySNATAddress = netip.Addr{}
	assert.Equal(t, want{netpol.Denied, "from-node", ""}, got(v.PolicyVerdict(&r, true)))
}
