package policyinsight

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// The benchmark's cluster: 50 Namespaces of 8 Deployments of 5 Pods (2,000
// Pods), 500 policies: per Namespace a default deny and one policy per
// Deployment (450 NetworkPolicies), 49 AdminNetworkPolicies, the baseline.
const (
	benchNamespaces  = 50
	benchWorkloads   = 8
	benchPods        = 5
	benchConnections = 1_000_000
	benchExternal    = 1_000
)

func benchCluster() *Snapshot {
	s := &Snapshot{}
	sel := func(kv ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{kv[0]: kv[1]}}
	}
	tcpP := func(port int32) []networkingv1.NetworkPolicyPort {
		p := intstr.FromInt32(port)
		return []networkingv1.NetworkPolicyPort{{Port: &p}}
	}
	for n := range benchNamespaces {
		ns := fmt.Sprintf("ns-%02d", n)
		s.SetNamespace(ns, map[string]string{NamespaceNameLabel: ns, "tier": []string{"front", "back"}[n%2]})
		s.SetNetworkPolicy(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default-deny"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}})
		for w := range benchWorkloads {
			prev, next := fmt.Sprintf("w%d", (w+benchWorkloads-1)%benchWorkloads), fmt.Sprintf("w%d", (w+1)%benchWorkloads)
			s.SetNetworkPolicy(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("w%d", w)},
				Spec: networkingv1.NetworkPolicySpec{
					PodSelector: *sel("app", fmt.Sprintf("w%d", w)),
					Ingress: []networkingv1.NetworkPolicyIngressRule{
						{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", prev)}}, Ports: tcpP(8080)},
						{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("tier", "front")}}, Ports: tcpP(8443)},
					},
					Egress: []networkingv1.NetworkPolicyEgressRule{
						{To: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", next)}}},
						{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}, Ports: tcpP(8443)},
						{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}}},
					},
				}})
		}
	}
	for i := 1; i < benchNamespaces; i++ {
		s.SetAdminPolicy(&v1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("anp-%02d", i)},
			Spec: v1alpha1.AdminNetworkPolicySpec{Priority: int32(10 + i),
				Subject: v1alpha1.AdminNetworkPolicySubject{Namespaces: sel(NamespaceNameLabel, fmt.Sprintf("ns-%02d", i))},
				Ingress: []v1alpha1.AdminNetworkPolicyIngressRule{{Name: "pass-prev", Action: v1alpha1.AdminNetworkPolicyRuleActionPass,
					From: []v1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel(NamespaceNameLabel, fmt.Sprintf("ns-%02d", i-1))}}}},
				Egress: []v1alpha1.AdminNetworkPolicyEgressRule{{Name: "no-test-net", Action: v1alpha1.AdminNetworkPolicyRuleActionDeny,
					To: []v1alpha1.AdminNetworkPolicyEgressPeer{{Networks: []v1alpha1.CIDR{"198.51.100.0/24"}}}}}}})
	}
	s.SetBaselinePolicy(&v1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.BaselineAdminNetworkPolicySpec{Subject: v1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
			Ingress: []v1alpha1.BaselineAdminNetworkPolicyIngressRule{{Name: "deny-all", Action: v1alpha1.BaselineAdminNetworkPolicyRuleActionDeny,
				From: []v1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}}})
	return s
}

// benchConn is one recorded connection: indexes into the endpoints.
type benchConn struct {
	src, dst int32
	port     uint16
}

// benchTraffic is 1M connections: each Pod calls its Deployment's
// neighbours in its own and the next Namespace, or an external address.
func benchTraffic() ([]Endpoint, []benchConn) {
	var eps []Endpoint
	for n := range benchNamespaces {
		for w := range benchWorkloads {
			for p := range benchPods {
				i := len(eps)
				eps = append(eps, pod(fmt.Sprintf("ns-%02d", n), "Deployment", fmt.Sprintf("w%d", w), fmt.Sprintf("w%d-%d", w, p),
					netip.AddrFrom4([4]byte{10, byte(n), byte(w), byte(p + 1)}).String(),
					"app=w"+strconv.Itoa(w), "pod-template-hash=h"+strconv.Itoa(i%3)))
			}
		}
	}
	pods := len(eps)
	for i := range benchExternal {
		net := []byte{192, 0, 2}
		if i%2 == 1 {
			net = []byte{198, 51, 100}
		}
		eps = append(eps, Endpoint{Kind: flowrecord.EndpointExternal, Address: netip.AddrFrom4([4]byte{net[0], net[1], net[2], byte(i / 2 % 250)})})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ports := []uint16{8080, 8443, 6379, 443}
	conns := make([]benchConn, benchConnections)
	perNS := benchWorkloads * benchPods
	for i := range conns {
		src := rng.IntN(pods)
		var dst int
		switch r := rng.IntN(10); {
		case r == 0:
			dst = pods + rng.IntN(benchExternal)
		default:
			ns := (src/perNS + rng.IntN(2)) % benchNamespaces
			dst = ns*perNS + rng.IntN(perNS)
		}
		conns[i] = benchConn{int32(src), int32(dst), ports[rng.IntN(len(ports))]}
	}
	return eps, conns
}

// BenchmarkWhatIf: one op is a what-if over 1M recorded connections (their
// aggregation into flows, then the evaluation) against 500 policies, with
// a draft that holds an AdminNetworkPolicy, so that no connection is left
// out as out of the draft's scope: the worst case. Target (testbed/results.md).
func BenchmarkWhatIf(b *testing.B) {
	cluster := benchCluster()
	if n := cluster.Len(); n != 500 {
		b.Fatalf("%d policies, want 500", n)
	}
	eps, conns := benchTraffic()
	draft, err := ParseDraft(stringsReader(`
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: no-redis}
spec:
  priority: 5
  subject: {namespaces: {}}
  egress: [{name: redis, action: Deny, to: [{namespaces: {}}], ports: [{portNumber: {port: 6379, protocol: TCP}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: w3, namespace: ns-07}
spec:
  podSelector: {matchLabels: {app: w3}}
  ingress: [{from: [{podSelector: {matchLabels: {app: w2}}}]}]
`), "")
	if err != nil {
		b.Fatal(err)
	}
	var rep *Report
	b.ReportAllocs()
	for b.Loop() {
		rec := &Recording{}
		for _, c := range conns {
			rec.Add(eps[c.src], eps[c.dst], tcp, c.port, 1, t0, t0)
		}
		if rep, err = WhatIf(cluster, draft, rec.Flows()); err != nil {
			b.Fatal(err)
		}
	}
	if rep.Connections != benchConnections || rep.NewlyDenied() == 0 {
		b.Fatalf("%d connections, %d newly denied: the draft should deny the Redis calls", rep.Connections, rep.NewlyDenied())
	}
	b.ReportMetric(float64(rep.Flows), "flows")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchConnections, "ns/connection")
}
