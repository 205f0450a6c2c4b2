//go:build integration

package deploy_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flowtel/flowtel/distributions"
)

func operatorCRs(t *testing.T) (node, gateway *unstructured.Unstructured) {
	t.Helper()
	for _, f := range []string{"operator/node.yaml", "operator/gateway.yaml"} {
		for _, o := range objects(t, readFile(t, f)) {
			if o.GetKind() != "OpenTelemetryCollector" || o.GetAPIVersion() != "opentelemetry.io/v1beta1" {
				t.Fatalf("%s: %s %s, want OpenTelemetryCollector opentelemetry.io/v1beta1", f, o.GetAPIVersion(), o.GetKind())
			}
			switch mode, _, _ := unstructured.NestedString(o.Object, "spec", "mode"); mode {
			case "daemonset":
				node = o
			case "statefulset", "deployment":
				gateway = o
			default:
				t.Fatalf("%s: mode %q", f, mode)
			}
		}
	}
	if node == nil || gateway == nil {
		t.Fatal("want a daemonset (node) and a statefulset or deployment (gateway) CR")
	}
	return node, gateway
}

// The Operator CRs: valid configurations for their distributions, the node
// collector reaches the headless Service the Operator makes for the gateway,
// and the ServiceAccounts they name are ours (rbac.yaml).
func TestOperatorCollectors(t *testing.T) {
	nodeCR, gwCR := operatorCRs(t)
	node, gw := operatorCollector(t, "operator", nodeCR), operatorCollector(t, "operator", gwCR)
	if node.dist != distributions.Node || gw.dist != distributions.Gateway {
		t.Fatalf("images: node CR runs %s, gateway CR runs %s", node.dist, gw.dist)
	}
	nodeRaw, gwRaw := node.validate(t), gw.validate(t)
	if nodeRaw == nil || gwRaw == nil {
		return
	}
	checkTLSPairing(t, nodeRaw, gwRaw)
	checkClientAuth(t, "operator", gw, gwRaw)
	var lc *corev1.Lifecycle
	if m, ok, _ := unstructured.NestedMap(gwCR.Object, "spec", "lifecycle"); ok {
		lc = &corev1.Lifecycle{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, lc); err != nil {
			t.Fatalf("gateway CR spec.lifecycle: %v", err)
		}
	}
	var grace *int64
	switch g, _, _ := unstructured.NestedFieldNoCopy(gwCR.Object, "spec", "terminationGracePeriodSeconds"); g := g.(type) {
	case int64:
		grace = &g
	case float64: // as the YAML decoder gives numbers
		n := int64(g)
		grace = &n
	}
	checkGatewayDrain(t, gw.source, nodeRaw, lc, grace)

	headless := gwCR.GetName() + "-collector-headless" // the Operator's naming
	if got := at(nodeRaw, "exporters", "load_balancing", "resolver", "k8s", "service"); got != headless+"."+gwCR.GetNamespace() {
		t.Errorf("node resolver service %v, want %s.%s", got, headless, gwCR.GetNamespace())
	}
	if at(nodeRaw, "exporters", "load_balancing", "resolver", "k8s", "return_hostnames") == true {
		// Endpoints get host names only when the StatefulSet's serviceName is that headless Service.
		if sn, _, _ := unstructured.NestedString(gwCR.Object, "spec", "serviceName"); sn != headless {
			t.Errorf("return_hostnames needs the gateway StatefulSet's serviceName = %s, got %q", headless, sn)
		}
	}
	if hn, _, _ := unstructured.NestedBool(nodeCR.Object, "spec", "hostNetwork"); !hn {
		t.Error("node CR: hostNetwork is not true")
	}
	add, _, _ := unstructured.NestedStringSlice(nodeCR.Object, "spec", "securityContext", "capabilities", "add")
	if strings.Join(add, ",") != "NET_ADMIN" {
		t.Errorf("node CR: capabilities added %v, want [NET_ADMIN]", add)
	}

	accounts := map[string]bool{}
	for _, o := range objects(t, readFile(t, "operator/rbac.yaml")) {
		if o.GetKind() == "ServiceAccount" {
			accounts[o.GetNamespace()+"/"+o.GetName()] = true
		}
	}
	for _, cr := range []*unstructured.Unstructured{nodeCR, gwCR} {
		sa, _, _ := unstructured.NestedString(cr.Object, "spec", "serviceAccount")
		if !accounts[cr.GetNamespace()+"/"+sa] {
			t.Errorf("%s names ServiceAccount %q, which rbac.yaml does not create", cr.GetName(), sa)
		}
	}
}
