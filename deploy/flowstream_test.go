//go:build integration

package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol/otelcoltest"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flowtel/flowtel/internal/components"
)

// configMapKey returns one key of a rendered ConfigMap (by name prefix:
// kustomize appends a hash).
func configMapKey(t *testing.T, objs []*unstructured.Unstructured, prefix, key string) string {
	t.Helper()
	for _, o := range find(objs, "ConfigMap") {
		var cm corev1.ConfigMap
		convert(t, o, &cm)
		if len(cm.Name) > len(prefix) && cm.Name[:len(prefix)+1] == prefix+"-" {
			return cm.Data[key]
		}
	}
	t.Fatalf("no ConfigMap %s-*", prefix)
	return ""
}

// validateGateway loads configuration files merged in order, as the
// collector does with several --config flags, and validates them against the
// gateway distribution's factories.
func validateGateway(t *testing.T, files ...string) map[string]any {
	t.Helper()
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
	factories, err := components.Factories(components.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otelcoltest.LoadConfigAndValidate(p, factories); err != nil {
		t.Fatalf("the gateway distribution rejects the configuration: %v\n%s", err, merged)
	}
	return conf.ToStringMap()
}

// The flow stream component: a fan-in collector running flow_stream behind
// the labelled Service, fed by every gateway replica, the shipped
// ClusterRoles, and the RBAC an authenticating extension server needs.
func TestFlowStreamComponent(t *testing.T) {
	objs := objects(t, kustomize(t, "examples/flow-stream"))

	roles := map[string]rbacv1.ClusterRole{}
	for _, o := range find(objs, "ClusterRole") {
		var r rbacv1.ClusterRole
		convert(t, o, &r)
		roles[r.Name] = r
	}
	for name, label := range map[string]string{"antrea-flow-viewer": "aggregate-to-admin", "antrea-flow-identity-viewer": "aggregate-to-view"} {
		if roles[name].Labels["rbac.authorization.k8s.io/"+label] != "true" {
			t.Errorf("ClusterRole %s: not labelled %s", name, label)
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
		if d.Spec.Template.Labels["app.kubernetes.io/name"] == svc.Spec.Selector["app.kubernetes.io/name"] {
			fanIn = &d
		}
	}
	if fanIn == nil || fanIn.Spec.Replicas == nil || *fanIn.Spec.Replicas != 1 {
		t.Fatalf("the Service selects no single-replica Deployment: %+v", fanIn)
	}
	fanInConfig := validateGateway(t, configMapKey(t, objs, "flowtel-flowstream-config", "config.yaml"))
	if got := at(fanInConfig, "service", "pipelines", "logs", "exporters"); !slices.Contains(got.([]any), any("flow_stream")) {
		t.Errorf("fan-in logs pipeline exporters %v lack flow_stream", got)
	}
	gw := validateGateway(t, configMapKey(t, objs, "flowtel-gateway-config", "config.yaml"), configMapKey(t, objs, "flowtel-gateway-flowstream", "flowstream.yaml"))
	if got := at(gw, "service", "pipelines", "logs", "exporters"); !slices.Equal(got.([]any), []any{"debug", "signal_to_metrics", "otlp/flowstream"}) {
		t.Errorf("gateway logs exporters %v: want the base list plus otlp/flowstream", got)
	}
	if got := at(gw, "exporters", "otlp/flowstream", "endpoint"); got != "flowtel-flowstream:4317" {
		t.Errorf("gateway otlp/flowstream endpoint %v", got)
	}

	// The real API server accepts it, and the fan-in's ServiceAccount may do
	// what the exporter does.
	c := startCluster(t)
	c.apply(t, "deploy/kubernetes/examples/flow-stream", kustomize(t, "examples/flow-stream"))
	sa := "system:serviceaccount:flowtel:" + fanIn.Spec.Template.Spec.ServiceAccountName
	for _, ra := range []authzv1.ResourceAttributes{
		{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"},
		{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create"},
		{Namespace: "kube-system", Resource: "configmaps", Name: "extension-apiserver-authentication", Verb: "watch"},
	} {
		sar, err := c.Admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:flowtel"}, ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !sar.Status.Allowed {
			t.Errorf("%s may not %s %s %s", sa, ra.Verb, ra.Resource, ra.Name)
		}
	}
}
