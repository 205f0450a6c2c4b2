package k8sflowprocessor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
)

// ingressPolicy is a NetworkPolicy of default selecting app=target, with
// one rule admitting app=from on TCP port.
func ingressPolicy(name, target, from string, port int32) *networkingv1.NetworkPolicy {
	p := intstr.FromInt32(port)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": target}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": from}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &p}},
			}},
		},
	}
}

func policyObjects(policies ...runtime.Object) []runtime.Object {
	objs := append(clusterObjects(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"kubernetes.io/metadata.name": "default"}}})
	return append(objs, policies...)
}

// TestPolicyAttribution: the whole path, informer to encoded attributes.
// Each Node fills the side of its own Pod: node-a the ingress of web-a
// (also for db-b on node-b, known through the cluster-wide Pod informer),
// node-b nothing for web-a's side.
func TestPolicyAttribution(t *testing.T) {
	clock := newFakeClock(t0.Add(10 * time.Minute))
	objs := policyObjects(ingressPolicy("allow-db", "web-a", "db-b", 8080))
	nodeA, _ := startProcessor(t, nodeConfig("node-a"), clock, objs...)
	nodeB, _ := startProcessor(t, nodeConfig("node-b"), clock, objs...)
	off := nodeConfig("node-a")
	off.NetworkPolicies = false
	nodeAOff, _ := startProcessor(t, off, clock, objs...)

	dbToWeb := flowCase{reporter: "node-a", src: hp(v4.dbB, 40000), dst: hp(v4.webA, 8080)}
	want := flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: "default", Name: "allow-db", UID: "uid-allow-db",
		RuleName: "ingress-0", RuleAction: flowrecord.RuleActionAllow}
	r := dbToWeb.record()
	require.Empty(t, first(nodeA.enrich(r)))
	assert.Equal(t, want, r.IngressPolicy)
	assert.Equal(t, flowrecord.Policy{}, r.EgressPolicy)
	lr := plog.NewLogRecord()
	attrcodec.Encode(r, lr)
	name, _ := lr.Attributes().Get("flow.ingress_policy.name")
	action, _ := lr.Attributes().Get("flow.ingress_policy.rule_action")
	assert.Equal(t, "allow-db", name.Str())
	assert.Equal(t, "allow", action.Str())

	dbToWeb.reporter = "node-b"
	r = dbToWeb.record()
	require.Empty(t, first(nodeB.enrich(r)))
	assert.Equal(t, flowrecord.Policy{}, r.IngressPolicy, "web-a's side is node-a's to say")

	// db-b → web-a:9090 is admitted by no rule. As a conntrack record
	// (no action) nothing is claimed; as the receiver's denied-connection
	// record (the NFLOG rule's Drop on the ingress side) it names the
	// isolating policy with that action, and no rule.
	r = flowCase{reporter: "node-a", src: hp(v4.dbB, 40000), dst: hp(v4.webA, 9090)}.record()
	require.Empty(t, first(nodeA.enrich(r)))
	assert.Equal(t, flowrecord.Policy{}, r.IngressPolicy, "a conntrack record: nothing claimed")
	r = flowCase{reporter: "node-a", src: hp(v4.dbB, 40000), dst: hp(v4.webA, 9090)}.record()
	r.IngressPolicy.RuleAction = flowrecord.RuleActionDrop
	require.Empty(t, first(nodeA.enrich(r)))
	assert.Equal(t, flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: "default", Name: "allow-db", UID: "uid-allow-db",
		RuleAction: flowrecord.RuleActionDrop}, r.IngressPolicy)
	assert.Equal(t, flowrecord.Policy{}, r.EgressPolicy, "db-b's side is node-b's to say")

	r = flowCase{reporter: "node-a", src: hp(v4.dbB, 40000), dst: hp(v4.webA, 8080)}.record()
	require.Empty(t, first(nodeAOff.enrich(r)))
	assert.Equal(t, flowrecord.Policy{}, r.IngressPolicy, "network_policies: false")
}

// BenchmarkEnrichPolicies is enrich with n NetworkPolicies selecting the
// destination Pod (the one that admits is checked last), next to
// network_policies: false.
func BenchmarkEnrichPolicies(b *testing.B) {
	clock := newFakeClock(t0.Add(10 * time.Minute))
	for _, n := range []int{0, 3, 50} {
		policies := []runtime.Object{ingressPolicy("zz-allow-db", "web-a", "db-b", 8080)}
		for i := range n - 1 {
			policies = append(policies, ingressPolicy(fmt.Sprintf("p%02d", i), "web-a", fmt.Sprintf("app-%d", i), 8080))
		}
		cfg := nodeConfig("node-a")
		cfg.NetworkPolicies = n > 0
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			p, _ := startProcessor(b, cfg, clock, policyObjects(policies...)...)
			tmpl := flowCase{reporter: "node-a", src: hp(v4.dbB, 40000), dst: hp(v4.webA, 8080)}.record()
			r := new(flowrecord.Record)
			b.ReportAllocs()
			for b.Loop() {
				*r = *tmpl
				p.enrich(r)
			}
			if n > 0 && r.IngressPolicy.Name != "zz-allow-db" {
				b.Fatalf("ingress policy %+v", r.IngressPolicy)
			}
		})
	}
}
