//go:build integration

package k8sflowprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"
	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestAdminNetworkPoliciesAgainstKubeAPIServer: with the network-policy-api
// CRDs installed in a real kube-apiserver, node-a's records name an
// AdminNetworkPolicy that admits a connection a NetworkPolicy denies, claim
// nothing for a conntrack record an ANP Deny rule matches (and name it on a
// denied-connection record), and name the BaselineAdminNetworkPolicy where
// no NetworkPolicy isolates the Pod; with the README's ClusterRole.
func TestAdminNetworkPoliciesAgainstKubeAPIServer(t *testing.T) {
	cp, granted := clusterWithRole(t)
	ctx := context.Background()
	admin := cp.Admin
	cp.InstallPolicyAPI(t)
	createPod(t, admin, "web-a", "node-a", v4.webA, v6.webA)
	createPod(t, admin, "client", "node-a", v4.client)
	createPod(t, admin, "db-b", "node-b", v4.dbB)

	app := func(name string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	}
	podsOf := func(name string) *v1alpha1.NamespacedPod {
		return &v1alpha1.NamespacedPod{PodSelector: app(name)}
	}
	_, err := admin.NetworkingV1().NetworkPolicies("default").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-web"},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: app("web-a"), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	policies, err := policyclient.NewForConfig(cp.Config(cp.AdminToken))
	require.NoError(t, err)
	allowDB, err := policies.PolicyV1alpha1().AdminNetworkPolicies().Create(ctx, &v1alpha1.AdminNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-db"},
		Spec: v1alpha1.AdminNetworkPolicySpec{Priority: 10, Subject: v1alpha1.AdminNetworkPolicySubject{Pods: podsOf("web-a")},
			Ingress: []v1alpha1.AdminNetworkPolicyIngressRule{{Name: "db-to-web", Action: v1alpha1.AdminNetworkPolicyRuleActionAllow,
				From: []v1alpha1.AdminNetworkPolicyIngressPeer{{Pods: podsOf("db-b")}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	denyClient, err := policies.PolicyV1alpha1().AdminNetworkPolicies().Create(ctx, &v1alpha1.AdminNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-client"},
		Spec: v1alpha1.AdminNetworkPolicySpec{Priority: 20, Subject: v1alpha1.AdminNetworkPolicySubject{Pods: podsOf("client")},
			Egress: []v1alpha1.AdminNetworkPolicyEgressRule{{Name: "no-web", Action: v1alpha1.AdminNetworkPolicyRuleActionDeny,
				To: []v1alpha1.AdminNetworkPolicyEgressPeer{{Pods: podsOf("web-a")}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	baseline, err := policies.PolicyV1alpha1().BaselineAdminNetworkPolicies().Create(ctx, &v1alpha1.BaselineAdminNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.BaselineAdminNetworkPolicySpec{Subject: v1alpha1.AdminNetworkPolicySubject{Pods: podsOf("client")},
			Ingress: []v1alpha1.BaselineAdminNetworkPolicyIngressRule{{Name: "from-db", Action: v1alpha1.BaselineAdminNetworkPolicyRuleActionAllow,
				From: []v1alpha1.AdminNetworkPolicyIngressPeer{{Pods: podsOf("db-b")}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	afterCreate := time.Now()

	cfg := nodeConfig("node-a")
	cfg.AuthType, cfg.KubeConfig = "kubeConfig", cp.Kubeconfig(t, "node-collector", granted)
	p, err := newProcessor(processortestSettings(), cfg, newClient, time.Now)
	require.NoError(t, err)
	require.NoError(t, p.start(ctx, nil))
	t.Cleanup(func() { require.NoError(t, p.shutdown(ctx)) })

	enrich := func(c flowCase, egressAction flowrecord.RuleAction) *flowrecord.Record {
		r := c.record()
		r.Start = afterCreate
		r.EgressPolicy.RuleAction = egressAction
		reason, _ := p.enrich(r)
		require.Empty(t, reason, c.name)
		return r
	}
	named := func(typ flowrecord.PolicyType, name string, uid any, rule string, action flowrecord.RuleAction) flowrecord.Policy {
		return flowrecord.Policy{Type: typ, Name: name, UID: uid.(string), RuleName: rule, RuleAction: action}
	}
	const anp, banp = flowrecord.PolicyTypeAdminNetworkPolicy, flowrecord.PolicyTypeBaselineAdminNetworkPolicy

	dbToWeb := flowCase{name: "db-b (node-b) → web-a:8080", reporter: "node-a", src: hp(v4.dbB, 40000), dst: hp(v4.webA, 8080)}
	assert.Equal(t, named(anp, "allow-db", string(allowDB.UID), "db-to-web", flowrecord.RuleActionAllow),
		enrich(dbToWeb, 0).IngressPolicy, "the ANP's Allow wins over the NetworkPolicy deny-web")

	clientToWeb := flowCase{name: "client → web-a", reporter: "node-a", src: hp(v4.client, 40001), dst: hp(v4.webA, 8080)}
	r := enrich(clientToWeb, 0)
	assert.Equal(t, flowrecord.Policy{}, r.EgressPolicy, "conntrack saw it: the ANP Deny is not claimed")
	assert.Equal(t, flowrecord.Policy{}, r.IngressPolicy, "deny-web isolates web-a, no rule admits: nothing claimed")
	assert.Equal(t, named(anp, "deny-client", string(denyClient.UID), "no-web", flowrecord.RuleActionDrop),
		enrich(clientToWeb, flowrecord.RuleActionDrop).EgressPolicy, "a denied-connection record names the ANP Deny rule")

	dbToClient := flowCase{name: "db-b (node-b) → client", reporter: "node-a", src: hp(v4.dbB, 40002), dst: hp(v4.client, 8080)}
	assert.Equal(t, named(banp, "default", string(baseline.UID), "from-db", flowrecord.RuleActionAllow),
		enrich(dbToClient, 0).IngressPolicy, "no NetworkPolicy isolates client: the BANP decides")
}
