//go:build integration

package k8sflowprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestNetworkPoliciesAgainstKubeAPIServer: NetworkPolicies created and
// edited through a real kube-apiserver name the admitting policy and rule in
// the records of node-a's Pods, with the ClusterRole of the README; a peer
// Pod on another Node is known through the cluster-wide Pod informer; a
// connection is judged by the policy as it was when it started.
func TestNetworkPoliciesAgainstKubeAPIServer(t *testing.T) {
	cp, granted := clusterWithRole(t)
	ctx := context.Background()
	admin := cp.Admin
	createPod(t, admin, "web-a", "node-a", v4.webA, v6.webA)
	createPod(t, admin, "client", "node-a", v4.client)
	createPod(t, admin, "db-b", "node-b", v4.dbB)

	beforePolicies := time.Now().Add(-10 * time.Second)
	port := func(p int32) []networkingv1.NetworkPolicyPort {
		v := intstr.FromInt32(p)
		return []networkingv1.NetworkPolicyPort{{Port: &v}}
	}
	udp := corev1.ProtocolUDP
	dns := intstr.FromInt32(53)
	allowDB, err := admin.NetworkingV1().NetworkPolicies("default").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-db"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-a"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "default"}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db-b"}},
				}},
				Ports: port(8080),
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.NetworkingV1().NetworkPolicies("default").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "client-egress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-a"}}}}},
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "8.8.8.0/24", Except: []string{"8.8.8.4/32"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	afterCreate := time.Now()

	cfg := nodeConfig("node-a")
	cfg.AuthType, cfg.KubeConfig = "kubeConfig", cp.Kubeconfig(t, "node-collector", granted)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(ctx)) })
	set := processortestSettings()
	set.TelemetrySettings = tt.NewTelemetrySettings()
	p, err := newProcessor(set, cfg, newClient, time.Now)
	require.NoError(t, err)
	require.NoError(t, p.start(ctx, nil))
	t.Cleanup(func() { require.NoError(t, p.shutdown(ctx)) })

	enrich := func(c flowCase, start time.Time) *flowrecord.Record {
		r := c.record()
		r.Start = start
		if c.proto != 0 {
			r.Protocol = c.proto
		}
		reason, _ := p.enrich(r)
		require.Empty(t, reason, c.name)
		return r
	}
	allow := func(name, uid, rule string) flowrecord.Policy {
		return flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: "default", Name: name, UID: uid,
			RuleName: rule, RuleAction: flowrecord.RuleActionAllow}
	}
	dbToWeb := flowCase{name: "db-b (node-b) → web-a:8080", reporter: "node-a", src: hp(v4.dbB, 40000), dst: hp(v4.webA, 8080)}
	admitted := allow("allow-db", string(allowDB.UID), "ingress-0")
	r := enrich(dbToWeb, afterCreate)
	assert.Equal(t, admitted, r.IngressPolicy, "a remote peer Pod selected by namespaceSelector + podSelector")
	assert.Equal(t, flowrecord.Policy{}, r.EgressPolicy, "db-b runs on node-b: its Node says")
	assert.Equal(t, flowrecord.Policy{}, enrich(dbToWeb, beforePolicies).IngressPolicy, "started before the policy existed")

	wrongPort := dbToWeb
	wrongPort.dst = hp(v4.webA, 9090)
	assert.Equal(t, flowrecord.Policy{}, enrich(wrongPort, afterCreate).IngressPolicy, "isolated, no rule admits: nothing claimed")

	clientToWeb := flowCase{name: "client → web-a (same Node)", reporter: "node-a", src: hp(v4.client, 40001), dst: hp(v4.webA, 8080)}
	r = enrich(clientToWeb, afterCreate)
	assert.Equal(t, "client-egress", r.EgressPolicy.Name)
	assert.Equal(t, "egress-0", r.EgressPolicy.RuleName)
	assert.Equal(t, flowrecord.Policy{}, r.IngressPolicy, "client is not db-b")

	clientDNS := flowCase{name: "client → 8.8.8.8:53/udp", reporter: "node-a", src: hp(v4.client, 40002), dst: hp(v4.external, 53), proto: 17}
	assert.Equal(t, "egress-1", enrich(clientDNS, afterCreate).EgressPolicy.RuleName)
	excepted := clientDNS
	excepted.dst = hp("8.8.8.4", 53)
	assert.Equal(t, flowrecord.Policy{}, enrich(excepted, afterCreate).EgressPolicy, "ipBlock except")

	// The policy is edited to port 9090: a connection that started before
	// the edit keeps the policy of its start.
	time.Sleep(10 * time.Millisecond)
	allowDB.Spec.Ingress[0].Ports = port(9090)
	_, err = admin.NetworkingV1().NetworkPolicies("default").Update(ctx, allowDB, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "the edited policy admits 9090", func() bool {
		return enrich(wrongPort, time.Now()).IngressPolicy == admitted
	})
	assert.Equal(t, admitted, enrich(dbToWeb, afterCreate).IngressPolicy, "8080 started before the edit")
	assert.Equal(t, flowrecord.Policy{}, enrich(dbToWeb, time.Now()).IngressPolicy, "8080 after the edit")

	// db-b's labels change: its later connections are no longer admitted.
	relabelled := time.Now()
	db, err := admin.CoreV1().Pods("default").Get(ctx, "db-b", metav1.GetOptions{})
	require.NoError(t, err)
	db.Labels = map[string]string{"app": "other"}
	_, err = admin.CoreV1().Pods("default").Update(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "db-b's new labels", func() bool {
		return enrich(wrongPort, time.Now()).IngressPolicy == flowrecord.Policy{}
	})
	assert.Equal(t, admitted, enrich(wrongPort, relabelled).IngressPolicy, "started before the label change")

	p.record(ctx, &batchCounts{})
	verdicts := metricValues(t, tt, "otelcol_processor_k8s_flow_policy_verdicts")
	assert.Positive(t, verdicts["allowed"])
	assert.Positive(t, verdicts["denied"])
	assert.Positive(t, verdicts["unisolated"])
	t.Logf("policy verdicts: %v", verdicts)
}
