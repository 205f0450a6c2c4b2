//go:build integration

package policyinsight

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

// TestPolicyRecommendWithLabelsFromTheAPI: rows as the shipped node
// collectors write them (no Pod labels) for web (a Deployment), tool (a
// bare Pod), gone (a Deployment since deleted) and api (a Deployment whose
// rows do carry labels). Against a real kube-apiserver holding web, tool and api,
// recommend selects web by its Deployment's matchLabels (not its
// template's other label), tool by its Pod's labels, api by its recorded
// labels rather than the API's, and writes nothing for gone, with a note
// naming why and pod_labels. A caller who may not read the workloads gets
// the same notes, not an error.
func TestPolicyRecommendWithLabelsFromTheAPI(t *testing.T) {
	cp := controlplane.Start(t)
	ctx := context.Background()
	_, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	deployment := func(name string, selector, template map[string]string) {
		_, err := cp.Admin.AppsV1().Deployments("shop").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	deployment("web", map[string]string{"app": "web"}, map[string]string{"app": "web", "version": "v2"})
	deployment("api", map[string]string{"app": "api"}, map[string]string{"app": "api"})
	_, err = cp.Admin.CoreV1().Pods("shop").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tool", Labels: map[string]string{"run": "tool", "controller-uid": "x1"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	pod := func(kind, workload, name, addr, labels string) Endpoint {
		return Endpoint{Kind: flowrecord.EndpointPod, Address: netip.MustParseAddr(addr), Namespace: "shop", Pod: name,
			WorkloadKind: kind, WorkloadName: workload, Node: "node-1", Labels: labels}
	}
	web := pod("Deployment", "web", "web-6f-a", "10.0.1.10", "")
	tool := pod("", "", "tool", "10.0.1.40", "")
	gone := pod("Deployment", "gone", "gone-1-a", "10.0.1.50", "")
	api := pod("Deployment", "api", "api-5d-a", "10.0.1.20", `{"app":"api-recorded","pod-template-hash":"5d"}`)
	apiUnlabelled := pod("Deployment", "api", "api-5d-b", "10.0.1.21", "")
	now := time.Now()
	rec := &Recording{}
	rec.Add(tool, web, 6, 8080, 2, now.Add(-2*time.Hour), now.Add(-time.Hour))
	rec.Add(web, api, 6, 9000, 3, now.Add(-2*time.Hour), now)
	rec.Add(web, apiUnlabelled, 6, 9000, 1, now.Add(-2*time.Hour), now)
	rec.Add(gone, web, 6, 8080, 1, now.Add(-3*time.Hour), now)

	resolved, labels := ResolveLabels(ctx, cp.Admin, rec)
	assert.Equal(t, map[string]map[string]string{
		"shop/Deployment/web": {"app": "web"},
		"shop/Pod/tool":       {"run": "tool"},
	}, labels.Selectors)
	require.Contains(t, labels.Missing, "shop/Deployment/gone")
	assert.Contains(t, labels.Missing["shop/Deployment/gone"], "no deployments.apps shop/gone")
	assert.Equal(t, rec.Connections(), resolved.Connections())
	// What-if sees the Pods' labels: web's template's, the bare Pod's.
	for _, f := range resolved.Flows() {
		switch f.Source.Workload() {
		case "shop/Deployment/web":
			assert.Equal(t, map[string]string{"app": "web", "version": "v2"}, LabelsOf(f.Source))
		case "shop/Pod/tool":
			assert.Equal(t, map[string]string{"run": "tool", "controller-uid": "x1"}, LabelsOf(f.Source))
		case "shop/Deployment/gone":
			assert.Nil(t, LabelsOf(f.Source))
		}
		if f.Destination.Pod == "api-5d-b" {
			assert.Nil(t, LabelsOf(f.Destination), "api's labels are recorded: its unlabelled rows are not filled")
		}
	}

	r := Recommend("shop", resolved.Flows(), RecommendOptions{Isolation: IsolateApplied, APILabels: labels})
	byName := map[string]*networkingv1.NetworkPolicy{}
	for _, p := range r.Policies {
		byName[p.Name] = p
	}
	require.Len(t, byName, 3, "%v", r.Notes)
	require.NotNil(t, byName["flowtel-web"], "%v", r.Notes)
	require.NotNil(t, byName["flowtel-tool"])
	require.NotNil(t, byName["flowtel-api"])
	assert.Equal(t, map[string]string{"app": "web"}, byName["flowtel-web"].Spec.PodSelector.MatchLabels)
	assert.Equal(t, map[string]string{"run": "tool"}, byName["flowtel-tool"].Spec.PodSelector.MatchLabels)
	assert.Equal(t, map[string]string{"app": "api-recorded"}, byName["flowtel-api"].Spec.PodSelector.MatchLabels)
	// web admits tool by its Pod's labels.
	assert.True(t, slices.ContainsFunc(byName["flowtel-web"].Spec.Ingress, func(r networkingv1.NetworkPolicyIngressRule) bool {
		return len(r.From) == 1 && r.From[0].PodSelector != nil && r.From[0].PodSelector.MatchLabels["run"] == "tool"
	}), "%+v", byName["flowtel-web"].Spec.Ingress)
	assert.True(t, slices.ContainsFunc(r.Notes, func(n string) bool {
		return n == "shop/Deployment/gone: no labels recorded, and the API server has no deployments.apps shop/gone now: no policy selects it (k8s_flow's pod_labels: true records them)"
	}), "%q", r.Notes)
	// The recommendation denies none of the connections it was made from.
	rep, err := WhatIf(&Snapshot{}, r.Draft(), resolved.Flows())
	require.NoError(t, err)
	assert.Zero(t, rep.NewlyDenied())

	// Without labels from the API (as before) nothing but api is selectable.
	bare := Recommend("shop", rec.Flows(), RecommendOptions{Isolation: IsolateApplied})
	require.Len(t, bare.Policies, 1)
	assert.Equal(t, "flowtel-api", bare.Policies[0].Name)

	// A caller without get on the workloads: notes, not an error.
	nobody, err := kubernetes.NewForConfig(cp.Config(cp.ServiceAccount(t, "shop", "nobody")))
	require.NoError(t, err)
	_, denied := ResolveLabels(ctx, nobody, rec)
	assert.Empty(t, denied.Selectors)
	assert.Contains(t, denied.Missing["shop/Deployment/web"], "forbidden (flowctl needs get on deployments.apps in shop)")
	assert.Contains(t, denied.Missing["shop/Pod/tool"], "forbidden (flowctl needs get on pods in shop)")
}
