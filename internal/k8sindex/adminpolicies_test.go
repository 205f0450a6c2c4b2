package k8sindex

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/netpol"
)

// anp adds (or updates) an AdminNetworkPolicy.
func (w *policyWorld) anp(name string, spec v1alpha1.AdminNetworkPolicySpec) {
	a := &v1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-anp-" + name),
		CreationTimestamp: metav1.NewTime(w.now)}, Spec: spec}
	w.ix.upsertPolicyAt(adminKey, &a.ObjectMeta, netpol.FromAdmin(a))
}

// banp adds (or updates) the BaselineAdminNetworkPolicy "default".
func (w *policyWorld) banp(spec v1alpha1.BaselineAdminNetworkPolicySpec) {
	b := &v1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-banp",
		CreationTimestamp: metav1.NewTime(w.now)}, Spec: spec}
	w.ix.upsertPolicyAt(baselineKey, &b.ObjectMeta, netpol.FromBaseline(b))
}

func nsSubject(kv ...string) v1alpha1.AdminNetworkPolicySubject {
	return v1alpha1.AdminNetworkPolicySubject{Namespaces: sel(kv...)}
}

func fromNamespaces(kv ...string) []v1alpha1.AdminNetworkPolicyIngressPeer {
	return []v1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel(kv...)}}
}

func anpIngress(name string, action v1alpha1.AdminNetworkPolicyRuleAction, peers []v1alpha1.AdminNetworkPolicyIngressPeer,
	ports ...v1alpha1.AdminNetworkPolicyPort) v1alpha1.AdminNetworkPolicyIngressRule {
	r := v1alpha1.AdminNetworkPolicyIngressRule{Name: name, Action: action, From: peers}
	if len(ports) > 0 {
		r.Ports = &ports
	}
	return r
}

func anpSpec(priority int32, subject v1alpha1.AdminNetworkPolicySubject, rules ...v1alpha1.AdminNetworkPolicyIngressRule) v1alpha1.AdminNetworkPolicySpec {
	return v1alpha1.AdminNetworkPolicySpec{Priority: priority, Subject: subject, Ingress: rules}
}

func banpIngress(name string, action v1alpha1.BaselineAdminNetworkPolicyRuleAction, peers []v1alpha1.AdminNetworkPolicyIngressPeer) v1alpha1.BaselineAdminNetworkPolicySpec {
	return v1alpha1.BaselineAdminNetworkPolicySpec{Subject: nsSubject("team", "web"),
		Ingress: []v1alpha1.BaselineAdminNetworkPolicyIngressRule{{Name: name, Action: action, From: peers}}}
}

const (
	anpAllow = v1alpha1.AdminNetworkPolicyRuleActionAllow
	anpDeny  = v1alpha1.AdminNetworkPolicyRuleActionDeny
	anpPass  = v1alpha1.AdminNetworkPolicyRuleActionPass
)

// TestAdminPolicyPrecedence holds the evaluator to the network-policy-api's
// precedence: AdminNetworkPolicies by priority, then NetworkPolicies, then
// the BaselineAdminNetworkPolicy where no NetworkPolicy isolates the Pod.
func TestAdminPolicyPrecedence(t *testing.T) {
	allowAll := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}
	toWeb := nsSubject("team", "web")
	tcpNumber := func(p int32) v1alpha1.AdminNetworkPolicyPort {
		return v1alpha1.AdminNetworkPolicyPort{PortNumber: &v1alpha1.Port{Protocol: corev1.ProtocolTCP, Port: p}}
	}
	named := func(n string) v1alpha1.AdminNetworkPolicyPort { return v1alpha1.AdminNetworkPolicyPort{NamedPort: &n} }
	portRange := v1alpha1.AdminNetworkPolicyPort{PortRange: &v1alpha1.PortRange{Start: 8000, End: 8100}}
	clientPods := []v1alpha1.AdminNetworkPolicyIngressPeer{{Pods: &v1alpha1.NamespacedPod{
		NamespaceSelector: *sel(), PodSelector: *sel("app", "client")}}}

	type np struct {
		ns, name string
		spec     networkingv1.NetworkPolicySpec
	}
	type anp struct {
		name string
		spec v1alpha1.AdminNetworkPolicySpec
	}
	for _, tc := range []struct {
		name    string
		anps    []anp
		nps     []np
		banp    *v1alpha1.BaselineAdminNetworkPolicySpec
		src     string
		proto   uint8
		port    uint16
		ingress want
	}{
		{name: "ANP Allow over a NetworkPolicy's deny",
			anps: []anp{{"allow-cli", anpSpec(10, toWeb, anpIngress("from-cli", anpAllow, fromNamespaces("team", "cli")))}},
			nps:  []np{{"web", "deny-all", denyAll}}, src: client,
			ingress: want{netpol.Allowed, "allow-cli", "from-cli"}},
		{name: "ANP Deny over a NetworkPolicy's allow",
			anps: []anp{{"deny-cli", anpSpec(10, toWeb, anpIngress("no-cli", anpDeny, fromNamespaces("team", "cli")))}},
			nps:  []np{{"web", "all", allowAll}}, src: client,
			ingress: want{netpol.Denied, "deny-cli", "no-cli"}},
		{name: "ANP Pass skips the other ANPs: the NetworkPolicy decides",
			anps: []anp{{"pass", anpSpec(1, toWeb, anpIngress("pass-cli", anpPass, fromNamespaces("team", "cli")))},
				{"deny-all", anpSpec(2, toWeb, anpIngress("everyone", anpDeny, fromNamespaces()))}},
			nps: []np{{"web", "all", allowAll}}, src: client,
			ingress: want{netpol.Allowed, "all", "ingress-0"}},
		{name: "ANP Pass, no NetworkPolicy: the BANP decides",
			anps: []anp{{"pass", anpSpec(1, toWeb, anpIngress("pass-cli", anpPass, fromNamespaces("team", "cli")))}},
			banp: new(banpIngress("baseline-deny", v1alpha1.BaselineAdminNetworkPolicyRuleActionDeny, fromNamespaces())),
			src:  client, ingress: want{netpol.Denied, "default", "baseline-deny"}},
		{name: "ANPs by priority, not by name",
			anps: []anp{{"a-deny", anpSpec(20, toWeb, anpIngress("deny", anpDeny, fromNamespaces()))},
				{"b-allow", anpSpec(5, toWeb, anpIngress("allow", anpAllow, fromNamespaces()))}},
			src: client, ingress: want{netpol.Allowed, "b-allow", "allow"}},
		{name: "ANPs by priority, the other way",
			anps: []anp{{"a-deny", anpSpec(5, toWeb, anpIngress("deny", anpDeny, fromNamespaces()))},
				{"b-allow", anpSpec(20, toWeb, anpIngress("allow", anpAllow, fromNamespaces()))}},
			src: client, ingress: want{netpol.Denied, "a-deny", "deny"}},
		{name: "equal priorities: by name",
			anps: []anp{{"b-deny", anpSpec(5, toWeb, anpIngress("deny", anpDeny, fromNamespaces()))},
				{"a-allow", anpSpec(5, toWeb, anpIngress("allow", anpAllow, fromNamespaces()))}},
			src: client, ingress: want{netpol.Allowed, "a-allow", "allow"}},
		{name: "a policy's rules in order",
			anps: []anp{{"ports", anpSpec(5, toWeb, anpIngress("no-9090", anpDeny, fromNamespaces(), tcpNumber(9090)),
				anpIngress("rest", anpAllow, fromNamespaces()))}},
			src: client, port: 9090, ingress: want{netpol.Denied, "ports", "no-9090"}},
		{name: "a rule's port does not match: the next rule",
			anps: []anp{{"ports", anpSpec(5, toWeb, anpIngress("no-9090", anpDeny, fromNamespaces(), tcpNumber(9090)),
				anpIngress("rest", anpAllow, fromNamespaces()))}},
			src: client, ingress: want{netpol.Allowed, "ports", "rest"}},
		{name: "namedPort (any protocol)",
			anps: []anp{{"named", anpSpec(5, toWeb, anpIngress("dns", anpDeny, fromNamespaces(), named("dns")))}},
			src:  client, proto: udp, port: 53, ingress: want{netpol.Denied, "named", "dns"}},
		{name: "namedPort the Pod does not have on that port",
			anps: []anp{{"named", anpSpec(5, toWeb, anpIngress("dns", anpDeny, fromNamespaces(), named("dns")))}},
			src:  client, port: 53},
		{name: "portRange",
			anps: []anp{{"range", anpSpec(5, toWeb, anpIngress("r", anpDeny, fromNamespaces(), portRange))}},
			src:  client, port: 8100, ingress: want{netpol.Denied, "range", "r"}},
		{name: "portRange, above",
			anps: []anp{{"range", anpSpec(5, toWeb, anpIngress("r", anpDeny, fromNamespaces(), portRange))}},
			src:  client, port: 8101},
		{name: "pods peer",
			anps: []anp{{"clients", anpSpec(5, toWeb, anpIngress("c", anpDeny, clientPods))}},
			src:  otherClient, ingress: want{netpol.Denied, "clients", "c"}},
		{name: "pods peer, other labels",
			anps: []anp{{"clients", anpSpec(5, toWeb, anpIngress("c", anpDeny, clientPods))}},
			src:  db},
		{name: "pods subject selects other Pods",
			anps: []anp{{"db-only", anpSpec(5, v1alpha1.AdminNetworkPolicySubject{Pods: &v1alpha1.NamespacedPod{
				NamespaceSelector: *sel("team", "web"), PodSelector: *sel("app", "db")}}, anpIngress("d", anpDeny, fromNamespaces()))}},
			src: client},
		{name: "namespaces subject selects other Namespaces",
			anps: []anp{{"other", anpSpec(5, nsSubject("team", "other"), anpIngress("d", anpDeny, fromNamespaces()))}},
			src:  client},
		{name: "BANP applies where no NetworkPolicy isolates the Pod",
			banp: new(banpIngress("baseline-deny", v1alpha1.BaselineAdminNetworkPolicyRuleActionDeny, fromNamespaces("team", "cli"))),
			src:  client, ingress: want{netpol.Denied, "default", "baseline-deny"}},
		{name: "BANP Allow",
			banp: new(banpIngress("baseline-allow", v1alpha1.BaselineAdminNetworkPolicyRuleActionAllow, fromNamespaces("team", "cli"))),
			src:  client, ingress: want{netpol.Allowed, "default", "baseline-allow"}},
		{name: "BANP not where a NetworkPolicy isolates the Pod (it allows)",
			banp: new(banpIngress("baseline-deny", v1alpha1.BaselineAdminNetworkPolicyRuleActionDeny, fromNamespaces())),
			nps:  []np{{"web", "all", allowAll}}, src: client, ingress: want{netpol.Allowed, "all", "ingress-0"}},
		{name: "BANP not where a NetworkPolicy isolates the Pod (it denies)",
			banp: new(banpIngress("baseline-allow", v1alpha1.BaselineAdminNetworkPolicyRuleActionAllow, fromNamespaces())),
			nps:  []np{{"web", "deny-all", denyAll}}, src: client, ingress: want{netpol.Denied, "deny-all", ""}},
		{name: "BANP with no matching rule: unisolated",
			banp: new(banpIngress("baseline-deny", v1alpha1.BaselineAdminNetworkPolicyRuleActionDeny, fromNamespaces("team", "other"))),
			src:  client},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newPolicyWorld(t)
			for _, a := range tc.anps {
				w.anp(a.name, a.spec)
			}
			for _, p := range tc.nps {
				w.policy(p.ns, p.name, p.spec)
			}
			if tc.banp != nil {
				w.banp(*tc.banp)
			}
			w.now = t0.Add(time.Second)
			proto, port := cmpOr(tc.proto, tcp), cmpOr(tc.port, 8080)
			in, eg := w.verdicts(proto, tc.src, web1, port, w.now)
			assert.Equal(t, tc.ingress, got(in), "ingress")
			assert.Equal(t, want{}, got(eg), "egress")
		})
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// TestAdminPolicyEgress: egress subjects and the networks and nodes peers.
func TestAdminPolicyEgress(t *testing.T) {
	egress := func(name string, action v1alpha1.AdminNetworkPolicyRuleAction, peer v1alpha1.AdminNetworkPolicyEgressPeer) v1alpha1.AdminNetworkPolicySpec {
		return v1alpha1.AdminNetworkPolicySpec{Priority: 3, Subject: v1alpha1.AdminNetworkPolicySubject{Pods: &v1alpha1.NamespacedPod{
			NamespaceSelector: *sel("team", "cli"), PodSelector: *sel("app", "client")}},
			Egress: []v1alpha1.AdminNetworkPolicyEgressRule{{Name: name, Action: action, To: []v1alpha1.AdminNetworkPolicyEgressPeer{peer}}}}
	}
	networks := v1alpha1.AdminNetworkPolicyEgressPeer{Networks: []v1alpha1.CIDR{"203.0.113.0/24", "198.51.100.0/24"}}
	for _, tc := range []struct {
		name   string
		spec   v1alpha1.AdminNetworkPolicySpec
		dst    string
		egress want
	}{
		{"networks, second CIDR", egress("ext", anpDeny, networks), "198.51.100.3", want{netpol.Denied, "egress", "ext"}},
		{"networks, outside", egress("ext", anpDeny, networks), "192.0.2.1", want{}},
		{"networks match cluster addresses too", egress("pods", anpDeny,
			v1alpha1.AdminNetworkPolicyEgressPeer{Networks: []v1alpha1.CIDR{"10.0.0.0/16"}}), web1, want{netpol.Denied, "egress", "pods"}},
		{"every Node", egress("nodes", anpAllow, v1alpha1.AdminNetworkPolicyEgressPeer{Nodes: sel()}), "10.1.0.1",
			want{netpol.Allowed, "egress", "nodes"}},
		{"Nodes by label: not known here", egress("nodes", anpAllow, v1alpha1.AdminNetworkPolicyEgressPeer{Nodes: sel("role", "infra")}), "10.1.0.1",
			want{netpol.Undetermined, "egress", ""}},
		{"a nodes peer is no Pod", egress("nodes", anpDeny, v1alpha1.AdminNetworkPolicyEgressPeer{Nodes: sel()}), web1, want{}},
		{"domainNames match nothing", egress("dns", anpDeny,
			v1alpha1.AdminNetworkPolicyEgressPeer{DomainNames: []v1alpha1.DomainName{"example.com"}}), "198.51.100.3", want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newPolicyWorld(t)
			w.anp("egress", tc.spec)
			w.now = t0.Add(time.Second)
			in, eg := w.verdicts(tcp, client, tc.dst, 443, w.now)
			assert.Equal(t, want{}, got(in), "ingress")
			assert.Equal(t, tc.egress, got(eg), "egress")
		})
	}
}

// TestAdminPolicyHistory: an AdminNetworkPolicy changed or deleted after
// the connection started is evaluated as it stood at the start.
func TestAdminPolicyHistory(t *testing.T) {
	w := newPolicyWorld(t)
	w.anp("guard", anpSpec(1, nsSubject("team", "web"), anpIngress("r", anpDeny, fromNamespaces("team", "cli"))))
	before := t0.Add(30 * time.Second)
	w.now = t0.Add(time.Minute)
	w.anp("guard", anpSpec(1, nsSubject("team", "web"), anpIngress("r", anpAllow, fromNamespaces("team", "cli"))))
	w.now = t0.Add(90 * time.Second)
	in, _ := w.verdicts(tcp, client, web1, 8080, before)
	assert.Equal(t, want{netpol.Denied, "guard", "r"}, got(in))
	in, _ = w.verdicts(tcp, client, web1, 8080, w.now)
	assert.Equal(t, want{netpol.Allowed, "guard", "r"}, got(in))
	w.now = t0.Add(2 * time.Minute)
	w.ix.deletePolicy(adminKey, "uid-anp-guard")
	w.now = t0.Add(3 * time.Minute)
	in, _ = w.verdicts(tcp, client, web1, 8080, w.now)
	assert.Equal(t, want{}, got(in))
	in, _ = w.verdicts(tcp, client, web1, 8080, before)
	assert.Equal(t, want{netpol.Denied, "guard", "r"}, got(in))
}

// TestAdminVerdictFields: the record names a cluster-scoped policy with its
// type, no Namespace and the rule's own name; a Deny on a connection the
// datapath let through claims nothing.
func TestAdminVerdictFields(t *testing.T) {
	anp := &netpol.Policy{Type: flowrecord.PolicyTypeAdminNetworkPolicy, Name: "guard", UID: "u1"}
	banp := &netpol.Policy{Type: flowrecord.PolicyTypeBaselineAdminNetworkPolicy, Name: "default", UID: "u2"}
	allow := netpol.Verdict{Outcome: netpol.Allowed, Policy: anp, RuleName: "r"}
	deny := netpol.Verdict{Outcome: netpol.Denied, Policy: anp, RuleName: "r"}
	assert.Equal(t, flowrecord.Policy{Type: flowrecord.PolicyTypeAdminNetworkPolicy, Name: "guard", UID: "u1", RuleName: "r",
		RuleAction: flowrecord.RuleActionAllow}, allow.Observed())
	assert.Equal(t, flowrecord.Policy{}, deny.Observed())
	assert.Equal(t, flowrecord.Policy{Type: flowrecord.PolicyTypeAdminNetworkPolicy, Name: "guard", UID: "u1", RuleName: "r",
		RuleAction: flowrecord.RuleActionDrop}, deny.Denied(flowrecord.RuleActionDrop))
	assert.Equal(t, flowrecord.PolicyTypeBaselineAdminNetworkPolicy,
		netpol.Verdict{Outcome: netpol.Allowed, Policy: banp, RuleName: "b"}.Observed().Type)
}
