//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"
	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/flowtel/flowtel/deploy/dashboards/demodata"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/chserver"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

// shopRecords are a shop's connections as flowtel records them: web (two
// ReplicaSets) takes the Internet's and the kubelet's, and calls api; api
// calls db in Namespace data, a payment API outside and CoreDNS; a report
// Job calls db once.
func shopRecords(now time.Time) []*flowrecord.Record {
	pod := func(ns, wk, w, name, addr string, labels map[string]string) flowrecord.Endpoint {
		return flowrecord.Endpoint{Address: netip.MustParseAddr(addr), Kind: flowrecord.EndpointPod, Namespace: ns, PodName: name,
			PodUID: "uid-" + name, PodLabels: labels, WorkloadKind: wk, WorkloadName: w, NodeName: "node-1", NodeUID: "uid-node-1"}
	}
	web1 := pod("shop", "Deployment", "web", "web-6f-a", "10.0.1.10", map[string]string{"app": "web", "pod-template-hash": "6f"})
	web2 := pod("shop", "Deployment", "web", "web-7c-b", "10.0.1.11", map[string]string{"app": "web", "pod-template-hash": "7c"})
	api := pod("shop", "Deployment", "api", "api-5d-a", "10.0.1.20", map[string]string{"app": "api", "pod-template-hash": "5d"})
	report := pod("shop", "Job", "report", "report-x", "10.0.1.30", map[string]string{"job": "report"})
	db := pod("data", "StatefulSet", "db", "db-0", "10.0.2.10", map[string]string{"app": "db"})
	dns := pod("kube-system", "Deployment", "coredns", "coredns-1", "10.0.0.53", map[string]string{"k8s-app": "kube-dns"})
	kubelet := flowrecord.Endpoint{Address: netip.MustParseAddr("192.168.0.11"), Kind: flowrecord.EndpointNode, NodeName: "node-1", NodeUID: "uid-node-1"}
	visitor := flowrecord.Endpoint{Address: netip.MustParseAddr("198.51.100.7"), Kind: flowrecord.EndpointExternal}
	pay := flowrecord.Endpoint{Address: netip.MustParseAddr("203.0.113.9"), Kind: flowrecord.EndpointExternal}
	var recs []*flowrecord.Record
	sport := uint16(40000)
	conn := func(src, dst flowrecord.Endpoint, proto uint8, port uint16, start time.Duration, length time.Duration) {
		sport++
		src.Port, dst.Port = sport, port
		s := now.Add(-start)
		recs = append(recs, &flowrecord.Record{Start: s, End: s.Add(length), Observed: s.Add(length + time.Second), Protocol: proto,
			Source: src, Destination: dst, OriginalDestinationAddress: dst.Address, OriginalDestinationPort: port,
			Stats: flowrecord.Counters{PacketTotal: 3, OctetTotal: 300, PacketDelta: 3, OctetDelta: 300}, EndReason: flowrecord.EndReasonEndOfFlow,
			Reporter: flowrecord.Reporter{NodeName: "node-1", Side: flowrecord.SideBoth}, Correlation: flowrecord.CorrelationNotRequired})
	}
	conn(visitor, web1, 6, 8080, 5*time.Hour, time.Minute)
	conn(visitor, web2, 6, 8080, time.Hour, time.Minute)
	conn(kubelet, web1, 6, 8081, 5*time.Hour, time.Second)
	conn(kubelet, web1, 6, 8081, 10*time.Minute, time.Second)
	conn(web1, api, 6, 9000, 5*time.Hour, time.Minute)
	conn(web2, api, 6, 9000, 20*time.Minute, time.Minute)
	conn(api, db, 6, 5432, 4*time.Hour, time.Hour)
	conn(api, pay, 6, 443, 3*time.Hour, time.Second)
	conn(api, dns, 17, 53, 2*time.Hour, time.Second)
	conn(report, db, 6, 5432, 30*time.Minute, time.Minute)
	return recs
}

// policyEnv is a real kube-apiserver with the network-policy-api and the
// shop's Namespaces and policies, and a real ClickHouse with its records.
type policyEnv struct {
	cp   *controlplane.ControlPlane
	pol  policyclient.Interface
	ch   *chserver.Server
	base []string // flowctl policy flags reaching both
}

func startPolicyEnv(t *testing.T) *policyEnv {
	t.Helper()
	ctx := context.Background()
	cp := controlplane.Start(t)
	cp.InstallPolicyAPI(t)
	for _, ns := range []string{"shop", "data"} {
		_, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// data's db admits every Pod of shop on 5432.
	_, err := cp.Admin.NetworkingV1().NetworkPolicies("data").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "shop"}}}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pol, err := policyclient.NewForConfig(cp.Config(cp.AdminToken))
	require.NoError(t, err)
	// An AdminNetworkPolicy keeps shop off the payment network.
	_, err = pol.PolicyV1alpha1().AdminNetworkPolicies().Create(ctx, &v1alpha1.AdminNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pay"},
		Spec: v1alpha1.AdminNetworkPolicySpec{Priority: 10,
			Subject: v1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "shop"}}},
			Egress: []v1alpha1.AdminNetworkPolicyEgressRule{{Name: "pay", Action: v1alpha1.AdminNetworkPolicyRuleActionDeny,
				To: []v1alpha1.AdminNetworkPolicyEgressPeer{{Networks: []v1alpha1.CIDR{"203.0.113.0/24"}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	srv := chserver.Start(t, chserver.Options{})
	demodata.Write(t, srv, "pol", shopRecords(time.Now()))
	return &policyEnv{cp: cp, pol: pol, ch: srv, base: []string{"--kubeconfig", cp.Kubeconfig(t, "admin", cp.AdminToken),
		"--clickhouse", fmt.Sprintf("http://127.0.0.1:%d", srv.HTTPPort), "--database", "pol"}}
}

// narrowDB is a draft narrowing data's db policy to shop's api.
const narrowDB = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db, namespace: data}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress:
  - from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: shop}}, podSelector: {matchLabels: {app: api}}}]
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// TestPolicyWhatIf: the policies from the API server and the connections
// from ClickHouse. Narrowing db's policy to api denies the report Job's
// connection (exit status 1, table and JSON name the policy); deleting the
// AdminNetworkPolicy admits api's payment call (exit 0); a window after
// every connection changes nothing.
func TestPolicyWhatIf(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	narrow := writeFile(t, "narrow.yaml", narrowDB)
	out, errOut, code := flowctl(ctx, append([]string{"policy", "what-if", "-f", narrow, "--cluster-wide"}, e.base...)...)
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, "flowctl: 10 recorded connections (every Namespace, since ")
	assert.Contains(t, errOut, "against 2 policies with the draft's 1 changes")
	assert.Contains(t, errOut, "the draft would deny 1 recorded connections the cluster's policies admit")
	assert.Regexp(t, `(?m)^CHANGE +SOURCE +DESTINATION +PORT +CONNECTIONS +DECIDED BY\nadmitted -> denied +shop/Job/report +data/StatefulSet/db +TCP/5432 +1 +ingress: NetworkPolicy data/db \(no rule admits it\)\n\z`, out)

	out, errOut, code = flowctl(ctx, append([]string{"policy", "what-if", "-f", narrow, "-n", "shop", "-o", "json"}, e.base...)...)
	assert.Equal(t, 1, code, errOut)
	var rep struct {
		Connections, NewlyDenied uint64
		Changes                  []struct {
			Source, Destination, Before, After string
			Rules                              []struct{ Direction, Kind, Namespace, Policy string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, uint64(10), rep.Connections, "every connection has an end in shop")
	assert.Equal(t, uint64(1), rep.NewlyDenied)
	require.Len(t, rep.Changes, 1)
	assert.Equal(t, "data", rep.Changes[0].Rules[0].Namespace)

	unpay := writeFile(t, "unpay.yaml", `
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: no-pay, annotations: {policy.flowtel.io/what-if: delete}}
`)
	out, errOut, code = flowctl(ctx, append([]string{"policy", "what-if", "-f", unpay, "-n", "shop"}, e.base...)...)
	assert.Zero(t, code, errOut)
	assert.Regexp(t, `\ndenied -> admitted +shop/Deployment/api +external/203\.0\.113\.9 +TCP/443 +1 +egress: no policy \(unisolated\)\n\z`, out)

	out, errOut, code = flowctl(ctx, append([]string{"policy", "what-if", "-f", narrow, "-n", "shop", "--since", time.Now().Add(time.Hour).Format(time.RFC3339)}, e.base...)...)
	assert.Zero(t, code, errOut)
	assert.Equal(t, "No recorded connection changes verdict.\n", out)
	assert.Contains(t, errOut, "flowctl: 0 recorded connections")

	_, errOut, code = flowctl(ctx, append([]string{"policy", "what-if", "-f", narrow, "-n", "shop", "--table", "nope"}, e.base...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "clickhouse: 404 Not Found")
}

// TestPolicyRecommend: recommend for shop writes NetworkPolicies the real
// API server accepts, verified by its own what-if (0 newly denied) and by
// what-if run on its YAML; the briefly seen Job is left open, noted.
func TestPolicyRecommend(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	out, errOut, code := flowctl(ctx, append([]string{"policy", "recommend", "-n", "shop", "--since", "1d"}, e.base...)...)
	require.Zero(t, code, errOut)
	assert.Contains(t, errOut, "flowctl: note: shop/Job/report: seen for 1m0s, less than 1h0m0s: no policy (it stays open)")
	assert.Contains(t, errOut, "flowctl: 2 policies for Namespace shop from 10 recorded connections since ")
	assert.Contains(t, errOut, "what-if over them: 0 newly denied")

	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(out)), 4096)
	var names []string
	for {
		var np networkingv1.NetworkPolicy
		if err := dec.Decode(&np); err != nil {
			break
		}
		created, err := e.cp.Admin.NetworkingV1().NetworkPolicies("shop").Create(ctx, &np, metav1.CreateOptions{})
		require.NoError(t, err, "the API server refuses %s", np.Name)
		names = append(names, created.Name)
	}
	assert.Equal(t, []string{"flowtel-api", "flowtel-web"}, names)
	web, err := e.cp.Admin.NetworkingV1().NetworkPolicies("shop").Get(ctx, "flowtel-web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"app": "web"}, web.Spec.PodSelector.MatchLabels, "pod-template-hash churned: not in the selector")

	// The policies are in the cluster now: what-if deleting web's denies
	// nothing and admits nothing new (its rules admitted everything seen).
	del := writeFile(t, "del.yaml", "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: flowtel-web, annotations: {policy.flowtel.io/what-if: delete}}\n")
	out, errOut, code = flowctl(ctx, append([]string{"policy", "what-if", "-f", del, "-n", "shop"}, e.base...)...)
	assert.Zero(t, code, errOut)
	assert.Equal(t, "No recorded connection changes verdict.\n", out)

	// As AdminNetworkPolicies: api's payment call stays denied by no-pay
	// (priority 10, before the recommendation's 200), so nothing is newly.
	out, errOut, code = flowctl(ctx, append([]string{"policy", "recommend", "-n", "shop", "--kind", "anp", "--priority", "200"}, e.base...)...)
	require.Zero(t, code, errOut)
	assert.Contains(t, errOut, "flowctl: 2 policies for Namespace shop")
	assert.Contains(t, errOut, "what-if over them: 0 newly denied")
	dec = utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(out)), 4096)
	names = nil
	for {
		var anp v1alpha1.AdminNetworkPolicy
		if err := dec.Decode(&anp); err != nil {
			break
		}
		created, err := e.pol.PolicyV1alpha1().AdminNetworkPolicies().Create(ctx, &anp, metav1.CreateOptions{})
		require.NoError(t, err, "the API server refuses %s", anp.Name)
		names = append(names, fmt.Sprintf("%s@%d", created.Name, created.Spec.Priority))
	}
	assert.Equal(t, []string{"flowtel-shop-api@200", "flowtel-shop-web@201"}, names)
	// Deleting one of them (an error if what-if had not read it from the
	// API server): its NetworkPolicy admits the same.
	delAdmin := writeFile(t, "del-admin.yaml", "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: flowtel-shop-web, annotations: {policy.flowtel.io/what-if: delete}}\n")
	out, errOut, code = flowctl(ctx, append([]string{"policy", "what-if", "-f", delAdmin, "-n", "shop"}, e.base...)...)
	assert.Zero(t, code, errOut)
	assert.Equal(t, "No recorded connection changes verdict.\n", out)
	assert.Contains(t, errOut, "against 6 policies", "db, no-pay, and the four recommended")

	_, errOut, code = flowctl(ctx, append([]string{"policy", "recommend", "-n", "shop", "--kind", "cnp"}, e.base...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--kind: \"cnp\" is not np or anp")
}

// TestPolicyRecommendShipped: the shop's records as the shipped node
// collectors write them, without Pod labels, in their own database. The
// API server has web, api, db and CoreDNS but no longer the report Job.
// What-if of the narrowed db policy leaves report's connection
// undetermined, with a note saying why, and api's (labels from its
// Deployment) admitted; recommend selects web and api by their
// Deployments' matchLabels, and notes that report has none (why, and
// pod_labels).
func TestPolicyRecommendShipped(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	recs := shopRecords(time.Now())
	for _, r := range recs {
		r.Source.PodLabels, r.Destination.PodLabels = nil, nil
	}
	demodata.Write(t, e.ch, "shipped", recs)
	podSpec := func(labels map[string]string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}}}}
	}
	for _, d := range []struct{ ns, name, key, value string }{
		{"shop", "web", "app", "web"}, {"shop", "api", "app", "api"}, {"kube-system", "coredns", "k8s-app", "kube-dns"},
	} {
		_, err := e.cp.Admin.AppsV1().Deployments(d.ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.name},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{d.key: d.value}},
				Template: podSpec(map[string]string{d.key: d.value, "tier": "x"})}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := e.cp.Admin.AppsV1().StatefulSets("data").Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: podSpec(map[string]string{"app": "db"})}}, metav1.CreateOptions{})
	require.NoError(t, err)
	args := append(e.base, "--database", "shipped")

	// What-if first: the recommended policies, once created, would make
	// every unlabelled Pod of shop a maybe-subject of theirs.
	narrow := writeFile(t, "narrow.yaml", narrowDB)
	out, errOut, code := flowctl(ctx, append([]string{"policy", "what-if", "-f", narrow, "-n", "shop"}, args...)...)
	assert.Zero(t, code, errOut)
	assert.Contains(t, errOut, "flowctl: note: shop/Job/report: no labels recorded, and the API server has no jobs.batch shop/report now: "+
		"its connections are undetermined where a selector must match it")
	assert.Regexp(t, `admitted -> undetermined +shop/Job/report +data/StatefulSet/db +TCP/5432`, out)
	assert.NotContains(t, out, "shop/Deployment/api", "api's labels came from its Deployment: still admitted")

	out, errOut, code = flowctl(ctx, append([]string{"policy", "recommend", "-n", "shop", "--since", "1d"}, args...)...)
	require.Zero(t, code, errOut)
	assert.Contains(t, errOut, "flowctl: note: shop/Job/report: no labels recorded, and the API server has no jobs.batch shop/report now: "+
		"no policy selects it (k8s_flow's pod_labels: true records them)")
	assert.Contains(t, errOut, "flowctl: 2 policies for Namespace shop from 10 recorded connections since ")
	assert.Contains(t, errOut, "what-if over them: 0 newly denied")
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(out)), 4096)
	selectors := map[string]map[string]string{}
	for {
		var np networkingv1.NetworkPolicy
		if err := dec.Decode(&np); err != nil {
			break
		}
		_, err := e.cp.Admin.NetworkingV1().NetworkPolicies("shop").Create(ctx, &np, metav1.CreateOptions{})
		require.NoError(t, err, "the API server refuses %s", np.Name)
		selectors[np.Name] = np.Spec.PodSelector.MatchLabels
	}
	assert.Equal(t, map[string]map[string]string{"flowtel-api": {"app": "api"}, "flowtel-web": {"app": "web"}}, selectors, "%s", out)
}
