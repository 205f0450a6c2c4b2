package policyinsight

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/flowtel/flowtel/internal/netpol"
)

// Recommend for shop: web and api get policies by their stable labels (the
// churning pod-template-hash and version left out), the batch Job, seen for
// a minute, none; the YAML read back as a draft denies no recorded
// connection, and denies what was not recorded, naming the policy.
func TestRecommendApplied(t *testing.T) {
	rec := shopFlows()
	r := Recommend("shop", rec.Flows(), RecommendOptions{Isolation: IsolateApplied, MinObserved: time.Hour})
	byName := map[string]*networkingv1.NetworkPolicy{}
	for _, p := range r.Policies {
		byName[p.Name] = p
	}
	require.Len(t, byName, 2, "%v", r.Notes)
	web, apiP := byName["flowtel-web"], byName["flowtel-api"]
	require.NotNil(t, web)
	require.NotNil(t, apiP)
	assert.Equal(t, map[string]string{"app": "web", "tier": "front"}, web.Spec.PodSelector.MatchLabels)
	assert.Equal(t, map[string]string{"app": "api"}, apiP.Spec.PodSelector.MatchLabels)
	assert.Contains(t, r.Notes, "shop/Job/report: seen for 1m0s, less than 1h0m0s: no policy (it stays open)")

	// web: from the kubelet's Node and the visitor by address, on the ports seen.
	require.Len(t, web.Spec.Ingress, 2)
	assert.Equal(t, "198.51.100.7/32", web.Spec.Ingress[0].From[0].IPBlock.CIDR)
	assert.Equal(t, "192.168.0.11/32", web.Spec.Ingress[1].From[0].IPBlock.CIDR)
	assert.Equal(t, int32(8081), web.Spec.Ingress[1].Ports[0].Port.IntVal)
	// api: egress to db by Namespace name and stable labels, to the
	// payment API by address, and the DNS rule, which covers CoreDNS as
	// seen.
	require.Len(t, apiP.Spec.Egress, 3)
	assert.Equal(t, "203.0.113.9/32", apiP.Spec.Egress[1].To[0].IPBlock.CIDR)
	assert.Equal(t, map[string]string{"k8s-app": "kube-dns"}, apiP.Spec.Egress[2].To[0].PodSelector.MatchLabels)
	assert.Len(t, apiP.Spec.Egress[2].Ports, 2, "UDP and TCP 53")
	dbPeer := apiP.Spec.Egress[0].To[0]
	assert.Equal(t, map[string]string{NamespaceNameLabel: "data"}, dbPeer.NamespaceSelector.MatchLabels)
	assert.Equal(t, map[string]string{"app": "db"}, dbPeer.PodSelector.MatchLabels)

	y, err := r.YAML()
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(y, []byte("# shop/Job/report: seen for")), "%s", y)
	d, err := ParseDraft(bytes.NewReader(y), "")
	require.NoError(t, err)
	rep, err := WhatIf(shopCluster(), d, rec.Flows())
	require.NoError(t, err)
	assert.Zero(t, rep.NewlyDenied(), "%+v", rep.Changes)
	assert.Empty(t, rep.Changes)

	// Not recorded: web straight to db, api to another external port.
	after, err := d.Apply(shopCluster())
	require.NoError(t, err)
	unseen := &Recording{}
	unseen.Add(web1, db, tcp, 5432, 1, t0, t0)
	unseen.Add(api, payAPI, tcp, 80, 1, t0, t0)
	for _, f := range unseen.Flows() {
		dec := Decide(after.Cluster(), f.connection())
		assert.Equal(t, Denied, dec.Result)
		assert.Equal(t, netpol.Denied, dec.Egress.Outcome)
		assert.Equal(t, "flowtel-"+f.Source.WorkloadName, dec.Egress.Policy.Name)
	}
}

// IsolateAll: a default-deny for the Namespace, the briefly seen Job gets
// its policy with a note, and the what-if over the window still denies
// nothing; a workload never seen is denied.
func TestRecommendIsolateAll(t *testing.T) {
	rec := shopFlows()
	r := Recommend("shop", rec.Flows(), RecommendOptions{Isolation: IsolateAll, MinObserved: time.Hour})
	var names []string
	for _, p := range r.Policies {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"flowtel-api", "flowtel-web", "flowtel-report", "flowtel-default-deny"}, names)
	assert.Contains(t, r.Notes, "shop/Job/report: seen for 1m0s, less than 1h0m0s: its policy admits only what was seen")
	verifyIsolatesAll(t, r, rec, "flowtel-default-deny")
}

// verifyIsolatesAll: with IsolateAll's recommendation, what-if over the
// recorded connections denies none, and a workload never seen is denied
// by the Namespace's default deny (policy).
func verifyIsolatesAll(t *testing.T, r *Recommendation, rec *Recording, policy string) {
	t.Helper()
	rep, err := WhatIf(shopCluster(), r.Draft(), rec.Flows())
	require.NoError(t, err)
	assert.Zero(t, rep.NewlyDenied(), "%+v", rep.Changes)
	after, err := r.Draft().Apply(shopCluster())
	require.NoError(t, err)
	stranger := &Recording{}
	stranger.Add(pod("shop", "Deployment", "cache", "cache-1", "10.0.1.40", "app=cache"), visitor, tcp, 443, 1, t0, t0)
	dec := Decide(after.Cluster(), stranger.Flows()[0].connection())
	assert.Equal(t, Denied, dec.Result)
	assert.Equal(t, policy, dec.Egress.Policy.Name)
}

// A workload whose recorded Pods share no label gets no policy, and a peer
// like it is admitted by its Namespace; an IPv6 external peer is a /128.
func TestRecommendWithoutStableLabels(t *testing.T) {
	rec := &Recording{}
	a := pod("shop", "Deployment", "odd", "odd-1", "10.0.1.50", "run=1")
	b := pod("shop", "Deployment", "odd", "odd-2", "10.0.1.51", "run=2")
	rec.Add(a, api, tcp, 9000, 1, t0, t0.Add(2*time.Hour))
	rec.Add(b, api, tcp, 9000, 1, t0, t0.Add(2*time.Hour))
	v6 := Endpoint{Kind: 3, Address: netip.MustParseAddr("2001:db8::7")}
	rec.Add(api, v6, tcp, 443, 1, t0, t0.Add(2*time.Hour))
	r := Recommend("shop", rec.Flows(), RecommendOptions{Isolation: IsolateApplied})
	require.Len(t, r.Policies, 1)
	assert.Equal(t, "flowtel-api", r.Policies[0].Name)
	assert.Contains(t, r.Notes, "shop/Deployment/odd: no label all its recorded Pods shared (or none recorded): no policy selects it")
	assert.Contains(t, r.Notes, "shop/Deployment/odd: no label all its recorded Pods shared: rules admit every Pod of Namespace shop for it")
	p := r.Policies[0].Spec
	assert.Empty(t, p.Ingress[0].From[0].PodSelector.MatchLabels)
	assert.Nil(t, p.Ingress[0].From[0].NamespaceSelector)
	assert.Equal(t, "2001:db8::7/128", p.Egress[0].To[0].IPBlock.CIDR)
	rep, err := WhatIf(shopCluster(), r.Draft(), rec.Flows())
	require.NoError(t, err)
	assert.Zero(t, rep.NewlyDenied(), "%+v", rep.Changes)
}

// --kind anp: one AdminNetworkPolicy per workload, in priority order, each
// admitting what its NetworkPolicy would and denying other Pods and
// addresses by name; ingress from Nodes and external clients has no
// AdminNetworkPolicy peer and is noted. Verified like the NetworkPolicies.
func TestRecommendAdmin(t *testing.T) {
	rec := shopFlows()
	r := Recommend("shop", rec.Flows(), RecommendOptions{Isolation: IsolateApplied, MinObserved: time.Hour, Kind: RecommendAdminPolicies, Priority: 100})
	assert.Empty(t, r.Policies)
	var got []string
	for _, p := range r.AdminPolicies {
		got = append(got, fmt.Sprintf("%s@%d", p.Name, p.Spec.Priority))
	}
	assert.Equal(t, []string{"flowtel-shop-api@100", "flowtel-shop-web@101"}, got)
	assert.Contains(t, r.Notes, "flowtel-shop-web: ingress from 192.168.0.11/32 is not expressible in an AdminNetworkPolicy: the NetworkPolicies decide it")
	web := r.AdminPolicies[1].Spec
	assert.Equal(t, map[string]string{NamespaceNameLabel: "shop"}, web.Subject.Pods.NamespaceSelector.MatchLabels)
	assert.Equal(t, map[string]string{"app": "web", "tier": "front"}, web.Subject.Pods.PodSelector.MatchLabels)
	require.Len(t, web.Ingress, 1, "only the Deny: web's clients are a Node and an external address")
	assert.Equal(t, "deny-other-pods", web.Ingress[0].Name)

	y, err := r.YAML()
	require.NoError(t, err)
	d, err := ParseDraft(bytes.NewReader(y), "")
	require.NoError(t, err)
	rep, err := WhatIf(shopCluster(), d, rec.Flows())
	require.NoError(t, err)
	assert.Zero(t, rep.NewlyDenied(), "%+v", rep.Changes)

	after, err := d.Apply(shopCluster())
	require.NoError(t, err)
	unseen := &Recording{}
	unseen.Add(web1, db, tcp, 5432, 1, t0, t0)
	unseen.Add(api, payAPI, tcp, 80, 1, t0, t0)
	unseen.Add(web2, api, tcp, 9001, 1, t0, t0)
	for _, f := range unseen.Flows() {
		dec := Decide(after.Cluster(), f.connection())
		require.Equal(t, Denied, dec.Result, "%s -> %s:%d", f.Source.Pod, f.Destination.Pod, f.Port)
		assert.Equal(t, "flowtel-shop-"+f.Source.WorkloadName, dec.Egress.Policy.Name)
		assert.Equal(t, "deny-other", dec.Egress.RuleName)
	}

	all := Recommend("shop", rec.Flows(), RecommendOptions{Isolation: IsolateAll, MinObserved: time.Hour, Kind: RecommendAdminPolicies, Priority: 100})
	last := all.AdminPolicies[len(all.AdminPolicies)-1]
	assert.Equal(t, "flowtel-shop-default-deny@103", fmt.Sprintf("%s@%d", last.Name, last.Spec.Priority))
	verifyIsolatesAll(t, all, rec, "flowtel-shop-default-deny")
}
