package policyinsight

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/internal/netpol"
)

// A NetworkPolicy for db that admits api only: the batch Job's one
// connection to db is newly denied, by that policy (no rule admits it);
// api's are not; nothing else changes.
func TestWhatIfNewPolicyDenies(t *testing.T) {
	rec := shopFlows()
	rep, err := WhatIf(shopCluster(), parseDraft(t, `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db-from-api, namespace: data}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress:
  - from: [{namespaceSelector: {matchLabels: {team: shop}}, podSelector: {matchLabels: {app: api}}}]
    ports: [{port: 5432}]
`), rec.Flows())
	require.NoError(t, err)
	assert.Equal(t, uint64(2621), rep.Connections)
	assert.Equal(t, 9, rep.Flows)
	require.Len(t, rep.Changes, 1, "%+v", rep.Changes)
	c := rep.Changes[0]
	assert.Equal(t, "shop/Job/report", c.Source)
	assert.Equal(t, "data/StatefulSet/db", c.Destination)
	assert.Equal(t, []any{"TCP", uint16(5432), Admitted, Denied, uint64(1)}, []any{c.Protocol, c.Port, c.Before, c.After, c.Connections})
	assert.Equal(t, []Rule{{Direction: "ingress", Outcome: "denied", Kind: KindNetworkPolicy, Namespace: "data", Policy: "db-from-api"}}, c.Rules)
	assert.Equal(t, uint64(1), rep.NewlyDenied())

	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, 1.0, back["newlyDenied"])
	assert.Equal(t, "denied", back["changes"].([]any)[0].(map[string]any)["after"])
}

// Deleting a default-deny NetworkPolicy admits what it denied, grouped by
// workload pair and port (web's two ReplicaSets are one workload); the
// deciding side is the one that denied.
func TestWhatIfDeletionAdmits(t *testing.T) {
	cluster := shopCluster()
	cluster.SetNetworkPolicy(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "deny-all"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
	})
	rec := shopFlows()
	rep, err := WhatIf(cluster, parseDraft(t, `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, annotations: {policy.flowtel.io/what-if: delete}}
`), rec.Flows())
	require.NoError(t, err)
	assert.Zero(t, rep.NewlyDenied())
	byPair := map[string]Change{}
	for _, c := range rep.Changes {
		assert.Equal(t, []any{Denied, Admitted}, []any{c.Before, c.After}, "%+v", c)
		byPair[c.Source+" -> "+c.Destination] = c
	}
	assert.Len(t, byPair, 7, "every flow from or to shop, web's two ReplicaSets as one: %v", rep.Changes)
	web := byPair["external/198.51.100.7 -> shop/Deployment/web"]
	assert.Equal(t, uint64(100), web.Connections)
	assert.Equal(t, []Rule{{Direction: "ingress", Outcome: "unisolated"}}, web.Rules)
	both := byPair["shop/Deployment/web -> shop/Deployment/api"]
	assert.Equal(t, uint64(1200), both.Connections)
	assert.Equal(t, []Rule{{Direction: "ingress", Outcome: "unisolated"}, {Direction: "egress", Outcome: "unisolated"}}, both.Rules)

	_, err = WhatIf(cluster, parseDraft(t, `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-al, annotations: {policy.flowtel.io/what-if: delete}}
`), rec.Flows())
	assert.ErrorContains(t, err, "draft deletes NetworkPolicy/shop/deny-al, which the cluster does not have")
}

// An AdminNetworkPolicy's Deny rule outranks the NetworkPolicy that admits
// the connection, and is named; a BaselineAdminNetworkPolicy denies only
// where no NetworkPolicy isolates.
func TestWhatIfClusterScoped(t *testing.T) {
	cluster := shopCluster()
	cluster.SetNetworkPolicy(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api-out"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{}},
		},
	})
	rec := shopFlows()
	rep, err := WhatIf(cluster, parseDraft(t, `
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: no-pay}
spec:
  priority: 10
  subject: {namespaces: {matchLabels: {team: shop}}}
  egress:
  - {name: pay, action: Deny, to: [{networks: [203.0.113.0/24]}]}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {team: shop}}}
  egress:
  - {name: no-db, action: Deny, to: [{namespaces: {matchLabels: {team: data}}}]}
`), rec.Flows())
	require.NoError(t, err)
	var got []string
	for _, c := range rep.Changes {
		require.Len(t, c.Rules, 1)
		r := c.Rules[0]
		got = append(got, c.Source+" -> "+c.Destination+" "+c.After.String()+" by "+r.Kind+"/"+r.Policy+"/"+r.Rule)
	}
	assert.Equal(t, []string{
		"shop/Deployment/api -> external/203.0.113.9 denied by AdminNetworkPolicy/no-pay/pay",
		"shop/Job/report -> data/StatefulSet/db denied by BaselineAdminNetworkPolicy/default/no-db",
	}, got, "api -> db stays admitted: api-out isolates api, so the baseline does not apply")
}

// A named port: the records hold no container ports, so a rule by name
// neither admits nor denies on what is known: undetermined, not counted
// as a denial.
func TestWhatIfNamedPortUndetermined(t *testing.T) {
	rec := shopFlows()
	rep, err := WhatIf(shopCluster(), parseDraft(t, `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-http}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{ports: [{port: http}]}]
`), rec.Flows())
	require.NoError(t, err)
	assert.Zero(t, rep.NewlyDenied())
	require.Len(t, rep.Changes, 2, "%+v", rep.Changes)
	for _, c := range rep.Changes {
		assert.Equal(t, Undetermined, c.After)
		assert.Equal(t, "shop/Deployment/web", c.Destination)
		assert.Equal(t, []Rule{{Direction: "ingress", Outcome: "undetermined", Kind: KindNetworkPolicy, Namespace: "shop", Policy: "web-http"}}, c.Rules)
	}
}

func TestParseDraftErrors(t *testing.T) {
	for y, want := range map[string]string{
		"": "no policy objects",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n":                                                     "is not a NetworkPolicy",
		"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p}\nspec: {podSelector: 3}\n": "NetworkPolicy/shop/p",
		"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {}\n":                                "without a name",
	} {
		_, err := ParseDraft(stringsReader(y), "shop")
		assert.ErrorContains(t, err, want, "%q", y)
	}
	_, err := ParseDraft(stringsReader("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p}\n"), "")
	assert.ErrorContains(t, err, "names no Namespace")
}

// hidden hides the snapshot's cluster type: Decide then evaluates every
// cluster-scoped policy, as netpol does for any Cluster.
type hidden struct{ netpol.Cluster }

// The per-Namespace list of cluster-scoped policies (snapshot.go) decides
// as netpol does with all of them, over the benchmark's cluster and a
// sample of its traffic, which has decisions of every tier.
func TestSubjectFilterDecidesAlike(t *testing.T) {
	c := benchCluster().Cluster()
	eps, conns := benchTraffic()
	rec := &Recording{}
	for _, cn := range conns[:50_000] {
		rec.Add(eps[cn.src], eps[cn.dst], tcp, cn.port, 1, t0, t0)
	}
	seen := map[string]int{}
	for _, f := range rec.Flows() {
		fast, slow := Decide(c, f.connection()), Decide(hidden{c}, f.connection())
		require.Equal(t, slow, fast, "%+v", f)
		for _, v := range []netpol.Verdict{fast.Ingress, fast.Egress} {
			if v.Policy != nil {
				seen[kindOf(v.Policy.Type)+" "+v.Outcome.String()]++
			}
		}
	}
	for _, k := range []string{"AdminNetworkPolicy denied", "NetworkPolicy allowed", "NetworkPolicy denied"} {
		assert.NotZero(t, seen[k], "no %s decision in the sample: %v", k, seen)
	}
}
