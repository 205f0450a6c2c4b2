//go:build integration

package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/featuregate"
	"go.opentelemetry.io/collector/otelcol/otelcoltest"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flowtel/flowtel/distributions"
)

// configMapKey returns one key of a rendered ConfigMap (by name prefix:
// kustomize appends a hash).
func configMapKey(t *testing.T, objs []*unstructured.Unstructured, prefix, key string) string {
	t.Helper()
	for _, o := range find(objs, "ConfigMap") {
		var cm corev1.ConfigMap
		convert(t, o, &cm)
		if cm.Name == prefix || strings.HasPrefix(cm.Name, prefix+"-") && len(cm.Name) == len(prefix)+11 {
			return cm.Data[key]
		}
	}
	t.Fatalf("no ConfigMap %s-*", prefix)
	return ""
}

// validateGateway loads configuration files merged in order, as the
// collector does with several --config flags (with the feature gate
// confmap.enableMergeAppendOption, which appends lists), and validates them
// against the gateway distribution's factories.
func validateGateway(t *testing.T, files ...string) map[string]any {
	t.Helper()
	if len(files) > 1 {
		gate := "confmap.enableMergeAppendOption"
		noError(t, featuregate.GlobalRegistry().Set(gate, true))
		defer func() { noError(t, featuregate.GlobalRegistry().Set(gate, false)) }()
	}
	var uris []string
	dir := t.TempDir()
	for i, f := range files {
		p := filepath.Join(dir, string(rune('a'+i))+".yaml")
		if err := os.WriteFile(p, []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
		uris = append(uris, "file:"+p)
	}
	t.Setenv("FLOWTEL_TLS_CLIENT_CA_FILE", "")
	t.Setenv("POD_NAMESPACE", "flowtel") // the StatefulSet's downward API: node_identity's service_accounts
	r, err := confmap.NewResolver(confmap.ResolverSettings{URIs: uris, ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()}})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := r.Resolve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	merged, err := yaml.Marshal(conf.ToStringMap())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "merged.yaml")
	if err := os.WriteFile(p, merged, 0o600); err != nil {
		t.Fatal(err)
	}
	factories, err := distributions.Factories(distributions.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otelcoltest.LoadConfigAndValidate(p, factories); err != nil {
		t.Fatalf("the gateway distribution rejects the configuration: %v\n%s", err, merged)
	}
	return conf.ToStringMap()
}

func noError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkFlowStream checks a rendering with the flow stream: the shipped
// ClusterRoles (unless installRoles is false), the labelled Service and the
// single-replica fan-in collector it selects, whose configuration runs
// flow_stream, and the gateway configuration (the files merged in order)
// exporting to it. It returns the fan-in Deployment.
func checkFlowStream(t *testing.T, objs []*unstructured.Unstructured, installRoles bool, gatewayConfigs ...string) *appsv1.Deployment {
	t.Helper()
	roles := map[string]rbacv1.ClusterRole{}
	for _, o := range find(objs, "ClusterRole") {
		var r rbacv1.ClusterRole
		convert(t, o, &r)
		roles[r.Name] = r
	}
	shipped := objects(t, readFile(t, "kubernetes/components/flow-stream/clusterroles.yaml"))
	for _, o := range shipped {
		var want rbacv1.ClusterRole
		convert(t, o, &want)
		got, ok := roles[want.Name]
		switch {
		case !installRoles && ok:
			t.Errorf("ClusterRole %s installed with installClusterRoles false", want.Name)
		case !installRoles:
		case !ok:
			t.Errorf("ClusterRole %s missing", want.Name)
		default:
			if !slices.EqualFunc(got.Rules, want.Rules, func(a, b rbacv1.PolicyRule) bool {
				return slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups)
			}) {
				t.Errorf("ClusterRole %s rules %+v, want %+v", want.Name, got.Rules, want.Rules)
			}
			for k, v := range want.Labels {
				if got.Labels[k] != v {
					t.Errorf("ClusterRole %s: label %s=%q, want %q", want.Name, k, got.Labels[k], v)
				}
			}
		}
	}
	var svc *corev1.Service
	for _, o := range find(objs, "Service") {
		var s corev1.Service
		convert(t, o, &s)
		if s.Labels["observability.antrea.io/flow-stream-service"] == "true" {
			svc = &s
		}
	}
	if svc == nil {
		t.Fatal("no Service labelled observability.antrea.io/flow-stream-service=true")
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "flowstream-grpc" && p.Port == 14740 }) {
		t.Errorf("Service %s: no port flowstream-grpc 14740: %+v", svc.Name, svc.Spec.Ports)
	}
	var fanIn *appsv1.Deployment
	for _, o := range find(objs, "Deployment") {
		var d appsv1.Deployment
		convert(t, o, &d)
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			fanIn = &d
		}
	}
	if fanIn == nil || fanIn.Spec.Replicas == nil || *fanIn.Spec.Replicas != 1 {
		t.Fatalf("the Service selects no single-replica Deployment: %+v", fanIn)
	}
	fanInConfig := validateGateway(t, configMapKey(t, objs, fanIn.Spec.Template.Spec.Volumes[0].ConfigMap.Name, "config.yaml"))
	if got := at(fanInConfig, "service", "pipelines", "logs", "exporters"); !slices.Contains(got.([]any), any("flow_stream")) {
		t.Errorf("fan-in logs pipeline exporters %v lack flow_stream", got)
	}
	gw := validateGateway(t, gatewayConfigs...)
	got := at(gw, "service", "pipelines", "logs", "exporters").([]any)
	if !slices.Contains(got, any("otlp/flowstream")) {
		t.Errorf("gateway logs exporters %v lack otlp/flowstream", got)
	}
	if len(gatewayConfigs) > 1 { // the base configuration's exporters are kept
		for _, e := range at(validateGateway(t, gatewayConfigs[0]), "service", "pipelines", "logs", "exporters").([]any) {
			if !slices.Contains(got, e) {
				t.Errorf("gateway logs exporters %v lost %v of the base configuration", got, e)
			}
		}
	}
	if got := at(gw, "exporters", "otlp/flowstream", "endpoint"); got != svc.Name+":4317" {
		t.Errorf("gateway otlp/flowstream endpoint %v, want the fan-in Service %s:4317", got, svc.Name)
	}
	return fanIn
}

// checkFanInRBAC: the fan-in's ServiceAccount may do what the exporter does.
func checkFanInRBAC(t *testing.T, c cluster, namespace, sa string) {
	t.Helper()
	user := "system:serviceaccount:" + namespace + ":" + sa
	for _, ra := range []authzv1.ResourceAttributes{
		{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"},
		{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create"},
		{Namespace: "kube-system", Resource: "configmaps", Name: "extension-apiserver-authentication", Verb: "watch"},
	} {
		sar, err := c.Admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace}, ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !sar.Status.Allowed {
			t.Errorf("%s may not %s %s %s", user, ra.Verb, ra.Resource, ra.Name)
		}
	}
}

// The flow stream, with kustomize (component flow-stream, the gateway's
// addition merged through a second --config) and with Helm
// (flowStream.enabled, installClusterRoles), accepted by the real API server.
func TestFlowStream(t *testing.T) {
	kobjs := objects(t, kustomize(t, "examples/flow-stream"))
	kFanIn := checkFlowStream(t, kobjs, true,
		configMapKey(t, kobjs, "flowtel-gateway-config", "config.yaml"), configMapKey(t, kobjs, "flowtel-gateway-flowstream", "flowstream.yaml"))
	template := func(set ...string) []byte {
		args := []string{"template", "flowtel", chartDir(), "--namespace", "flowtel"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		return run(t, nil, helm(t), args...)
	}
	helmOut := template("flowStream.enabled=true")
	hobjs := objects(t, helmOut)
	checkFlowStream(t, hobjs, true, configMapKey(t, hobjs, "flowtel-gateway-config", "config.yaml"))
	noRoles := objects(t, template("flowStream.enabled=true", "flowStream.installClusterRoles=false"))
	checkFlowStream(t, noRoles, false, configMapKey(t, noRoles, "flowtel-gateway-config", "config.yaml"))
	if _, err := runErr(nil, helm(t), "template", "flowtel", chartDir(), "--set", "flowStream.enabled=true", "--set", "tls.enabled=false"); err == nil || !strings.Contains(err.Error(), "flowStream.enabled needs tls.enabled") {
		t.Errorf("flowStream without TLS: got %v", err)
	}
	run(t, nil, helm(t), "lint", "--strict", chartDir(), "--set", "flowStream.enabled=true")

	c := startCluster(t)
	c.apply(t, "deploy/kubernetes/examples/flow-stream", kustomize(t, "examples/flow-stream"))
	checkFanInRBAC(t, c, "flowtel", kFanIn.Spec.Template.Spec.ServiceAccountName)
	if out, err := c.kubectl(nil, "create", "namespace", "helm-fs"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	c.apply(t, "helm template flowStream.enabled=true", run(t, nil, helm(t), "template", "fs", chartDir(), "--namespace", "helm-fs", "--set", "flowStream.enabled=true", "--set", "flowStream.installClusterRoles=false"))
	checkFanInRBAC(t, c, "helm-fs", "fs-flowtel-flowstream")
}

// The Operator's fan-in CR: a valid gateway-distribution configuration
// running flow_stream, one replica, a ServiceAccount the file creates, and a
// labelled Service selecting the Pods the Operator makes for it; the real API
// server (with the Operator's CRD) accepts it and its RBAC allows what the
// exporter does.
func TestFlowStreamOperator(t *testing.T) {
	objs := objects(t, readFile(t, "operator/flowstream.yaml"))
	crs := find(objs, "OpenTelemetryCollector")
	if len(crs) != 1 {
		t.Fatalf("want one OpenTelemetryCollector, got %d", len(crs))
	}
	cr := crs[0]
	col := operatorCollector(t, "operator/flowstream.yaml", cr)
	if col.dist != distributions.Gateway {
		t.Fatalf("the fan-in runs %s, want the gateway distribution", col.dist)
	}
	raw := col.validate(t)
	if got := at(raw, "service", "pipelines", "logs", "exporters"); !slices.Equal(got.([]any), []any{"flow_stream"}) {
		t.Errorf("fan-in exporters %v", got)
	}
	if r, _, _ := unstructured.NestedFieldNoCopy(cr.Object, "spec", "replicas"); fmt.Sprint(r) != "1" {
		t.Errorf("replicas %v, want 1", r)
	}
	sa, _, _ := unstructured.NestedString(cr.Object, "spec", "serviceAccount")
	if !slices.ContainsFunc(find(objs, "ServiceAccount"), func(o *unstructured.Unstructured) bool {
		return o.GetName() == sa && o.GetNamespace() == cr.GetNamespace()
	}) {
		t.Errorf("ServiceAccount %s is not in the file", sa)
	}
	var svc corev1.Service
	convert(t, find(objs, "Service")[0], &svc)
	operatorPodLabels := labels.Set{ // what the Operator (v0.141) puts on the CR's Pods
		"app.kubernetes.io/managed-by": "opentelemetry-operator",
		"app.kubernetes.io/instance":   cr.GetNamespace() + "." + cr.GetName(),
		"app.kubernetes.io/part-of":    "opentelemetry",
		"app.kubernetes.io/component":  "opentelemetry-collector",
	}
	if svc.Labels["observability.antrea.io/flow-stream-service"] != "true" || !labels.SelectorFromSet(svc.Spec.Selector).Matches(operatorPodLabels) {
		t.Errorf("Service %s: labels %v, selector %v", svc.Name, svc.Labels, svc.Spec.Selector)
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "flowstream-grpc" && p.Port == 14740 }) {
		t.Errorf("Service %s: no port flowstream-grpc 14740", svc.Name)
	}

	c := startCluster(t)
	if out, err := c.kubectl(nil, "apply", "--server-side", "-f", operatorCRD(t)); err != nil {
		t.Fatalf("installing the Operator's CRD: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err := c.kubectl(nil, "get", "crd/opentelemetrycollectors.opentelemetry.io", "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		if err == nil && string(out) == "True" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Operator's CRD is not Established after 60 s")
		}
	}
	c.apply(t, "operator/rbac.yaml", readFile(t, "operator/rbac.yaml")) // the flowtel Namespace
	c.apply(t, "operator/flowstream.yaml", readFile(t, "operator/flowstream.yaml"))
	checkFanInRBAC(t, c, cr.GetNamespace(), sa)
}
