//go:build integration

package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// flowtel in place of Antrea's Flow Aggregator (component
// antrea-flow-aggregator): the Service flow-aggregator in the Namespace
// flow-aggregator serves the agents' ports on the gateway it selects, whose
// merged configuration adds antrea_flows to the one logs pipeline (so the
// agents' halves meet the node collectors' in one flow_correlation) with the
// certificates deploy/antrea-certs.sh makes; the real API server accepts it.
func TestAntreaFlowAggregator(t *testing.T) {
	manifests := kustomize(t, "examples/antrea-flow-aggregator")
	objs := objects(t, manifests)
	c := checkAntreaService(t, objs)
	if ds := find(objs, "DaemonSet"); len(ds) != 0 {
		t.Errorf("the example runs node collectors beside the agents (connections reported twice): %d DaemonSets", len(ds))
	}
	var files []string
	for _, a := range c.Args {
		if f, ok := strings.CutPrefix(a, "--config=/etc/flowtel/"); ok {
			files = append(files, f)
		}
	}
	if !slices.Equal(files, []string{"config/config.yaml", "config/certificates.yaml", "antrea-config/antrea.yaml"}) {
		t.Fatalf("gateway --config files %v", files)
	}
	checkAntreaConfig(t, configMapKey(t, objs, "flowtel-gateway-config", "config.yaml"),
		configMapKey(t, objs, "flowtel-gateway-antrea", "antrea.yaml"))

	// Helm: antreaAgents.enabled, released in the Namespace flow-aggregator.
	template := func(set ...string) ([]byte, error) {
		args := []string{"template", "flowtel", chartDir(), "--namespace", "flow-aggregator"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		return runErr(nil, helm(t), args...)
	}
	helmOut, err := template("antreaAgents.enabled=true", "gateway.replicas=1", "node.enabled=false")
	noError(t, err)
	hobjs := objects(t, helmOut)
	if ds := find(hobjs, "DaemonSet"); len(ds) != 0 {
		t.Errorf("node.enabled=false renders %d DaemonSets", len(ds))
	}
	checkAntreaService(t, hobjs)
	checkAntreaConfig(t, configMapKey(t, hobjs, "flowtel-gateway-config", "config.yaml"))
	if _, err := template("antreaAgents.enabled=true"); err == nil || !strings.Contains(err.Error(), "antreaAgents.enabled needs gateway.replicas=1") {
		t.Errorf("antreaAgents with two gateway replicas: got %v", err)
	}
	run(t, nil, helm(t), "lint", "--strict", chartDir(), "--set", "antreaAgents.enabled=true", "--set", "gateway.replicas=1")

	// The certificates: the server name the agents verify, a client
	// certificate the gateway's CA signed.
	out := t.TempDir()
	run(t, nil, filepath.Join(deployDir(), "antrea-certs.sh"), "--out", out)
	san, err := exec.Command("openssl", "x509", "-in", filepath.Join(out, "server.crt"), "-noout", "-ext", "subjectAltName").CombinedOutput()
	noError(t, err)
	if !strings.Contains(string(san), "DNS:flow-aggregator.flow-aggregator.svc") {
		t.Errorf("server certificate names %s, want flow-aggregator.flow-aggregator.svc", san)
	}
	if b, err := exec.Command("openssl", "verify", "-purpose", "sslclient", "-CAfile", filepath.Join(out, "ca.crt"), filepath.Join(out, "client.crt")).CombinedOutput(); err != nil {
		t.Errorf("client certificate: %v: %s", err, b)
	}
	if _, err := os.Stat(filepath.Join(out, "client.key")); err != nil {
		t.Error(err)
	}

	cl := startCluster(t)
	cl.apply(t, "deploy/kubernetes/examples/antrea-flow-aggregator", manifests)
	// The real authorizer: the agents may read what they need, not other Secrets.
	user := "system:serviceaccount:kube-system:antrea-agent"
	for _, tc := range []struct {
		ra      authzv1.ResourceAttributes
		allowed bool
	}{
		{authzv1.ResourceAttributes{Namespace: "flow-aggregator", Resource: "configmaps", Name: "flow-aggregator-ca", Verb: "get"}, true},
		{authzv1.ResourceAttributes{Namespace: "flow-aggregator", Resource: "secrets", Name: "flow-aggregator-client-tls", Verb: "get"}, true},
		{authzv1.ResourceAttributes{Namespace: "flow-aggregator", Resource: "secrets", Name: "flow-aggregator-tls", Verb: "get"}, false},
	} {
		sar, err := cl.Admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}, ResourceAttributes: &tc.ra}}, metav1.CreateOptions{})
		noError(t, err)
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("%s %s %s/%s: allowed %v, want %v", user, tc.ra.Verb, tc.ra.Resource, tc.ra.Name, sar.Status.Allowed, tc.allowed)
		}
	}
	if out, err := cl.kubectl(nil, "create", "namespace", "helm-afa"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	helmNS, err := template("antreaAgents.enabled=true", "gateway.replicas=1")
	noError(t, err)
	cl.apply(t, "helm template antreaAgents.enabled", []byte(strings.ReplaceAll(string(helmNS), "namespace: flow-aggregator", "namespace: helm-afa")))
}

// checkAntreaService checks the Service flow-aggregator in the Namespace
// flow-aggregator and the single-replica gateway it selects, which serves its
// ports and mounts the Secret flow-aggregator-tls; it returns the gateway's
// container.
func checkAntreaService(t *testing.T, objs []*unstructured.Unstructured) corev1.Container {
	t.Helper()
	var svc *corev1.Service
	for _, o := range find(objs, "Service") {
		var s corev1.Service
		convert(t, o, &s)
		if s.Name == "flow-aggregator" {
			svc = &s
		}
	}
	if svc == nil || svc.Namespace != "flow-aggregator" {
		t.Fatalf("no Service flow-aggregator in the Namespace flow-aggregator: %+v", svc)
	}
	want := map[string]struct {
		port  int32
		proto corev1.Protocol
	}{"ipfix-tcp": {4739, corev1.ProtocolTCP}, "grpc": {14739, corev1.ProtocolTCP}}
	if len(svc.Spec.Ports) != len(want) {
		t.Errorf("Service ports %+v, want %v", svc.Spec.Ports, want)
	}
	var gw *appsv1.StatefulSet
	for _, o := range find(objs, "StatefulSet") {
		var s appsv1.StatefulSet
		convert(t, o, &s)
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) {
			gw = &s
		}
	}
	if gw == nil {
		t.Fatal("the Service selects no gateway StatefulSet")
	}
	if gw.Spec.Replicas == nil || *gw.Spec.Replicas != 1 {
		t.Errorf("gateway replicas %v, want 1: each agent exports to one replica", gw.Spec.Replicas)
	}
	c := gw.Spec.Template.Spec.Containers[0]
	// No plaintext transport beside TLS (issue 42.1): UDP is neither
	// encrypted nor authenticated, so nothing listens for it.
	if slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Protocol == corev1.ProtocolUDP }) {
		t.Errorf("the gateway container serves UDP %+v beside TLS", c.Ports)
	}
	for _, p := range svc.Spec.Ports {
		w, ok := want[p.Name]
		if !ok || p.Port != w.port || p.Protocol != w.proto {
			t.Errorf("Service port %+v, want %v", p, w)
		}
		if p.TargetPort.Type != intstr.String || !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool {
			return cp.Name == p.TargetPort.StrVal && cp.ContainerPort == w.port && cp.Protocol == w.proto
		}) {
			t.Errorf("Service port %s: the gateway container has no port %v %d/%s", p.Name, p.TargetPort, w.port, w.proto)
		}
	}
	checkAgentRBAC(t, objs)
	if !slices.ContainsFunc(gw.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "flow-aggregator-tls"
	}) || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/flowtel/antrea" }) {
		t.Error("the gateway does not mount the Secret flow-aggregator-tls at /etc/flowtel/antrea")
	}
	return c
}

// checkAgentRBAC: the agents' ServiceAccount (antrea-agent in kube-system)
// may get the CA ConfigMap and the client Secret in flow-aggregator, and
// nothing else, as the Flow Aggregator's Role granted.
func checkAgentRBAC(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var role *rbacv1.Role
	for _, o := range find(objs, "Role") {
		var r rbacv1.Role
		convert(t, o, &r)
		if r.Name == "flow-exporter-role" && r.Namespace == "flow-aggregator" {
			role = &r
		}
	}
	if role == nil {
		t.Fatal("no Role flow-exporter-role in flow-aggregator")
	}
	got := map[string][]string{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			got[res] = append(got[res], r.ResourceNames...)
			if !slices.Equal(r.Verbs, []string{"get"}) {
				t.Errorf("Role flow-exporter-role grants %v on %s, want get only", r.Verbs, res)
			}
		}
	}
	if !slices.Equal(got["configmaps"], []string{"flow-aggregator-ca"}) || !slices.Equal(got["secrets"], []string{"flow-aggregator-client-tls"}) || len(got) != 2 {
		t.Errorf("Role flow-exporter-role grants %v", got)
	}
	bound := false
	for _, o := range find(objs, "RoleBinding") {
		var b rbacv1.RoleBinding
		convert(t, o, &b)
		if b.Namespace == "flow-aggregator" && b.RoleRef.Kind == "Role" && b.RoleRef.Name == "flow-exporter-role" &&
			slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
				return s.Kind == "ServiceAccount" && s.Name == "antrea-agent" && s.Namespace == "kube-system"
			}) {
			bound = true
		}
	}
	if !bound {
		t.Error("no RoleBinding of flow-exporter-role to kube-system/antrea-agent in flow-aggregator")
	}
}

// checkAntreaConfig: the gateway configuration (files merged in order) runs
// antrea_flows in its one logs pipeline with the Secret's files.
func checkAntreaConfig(t *testing.T, files ...string) {
	t.Helper()
	cfg := validateGateway(t, files...)
	receivers, _ := at(cfg, "service", "pipelines", "logs", "receivers").([]any)
	if !slices.Contains(receivers, any("otlp")) || !slices.Contains(receivers, any("antrea_flows")) {
		t.Errorf("gateway logs receivers %v, want otlp and antrea_flows in the one pipeline", receivers)
	}
	for key, want := range map[string]string{"cert_file": "/etc/flowtel/antrea/tls.crt", "key_file": "/etc/flowtel/antrea/tls.key",
		"client_ca_file": "/etc/flowtel/antrea/ca.crt"} {
		if got := at(cfg, "receivers", "antrea_flows", "tls", key); got != want {
			t.Errorf("antrea_flows tls.%s %v, want %s (the keys of flow-aggregator-tls)", key, got, want)
		}
	}
	// TLS only: no UDP beside it, and no opt-out (issue 42.1).
	if got, _ := at(cfg, "receivers", "antrea_flows", "ipfix", "transports").([]any); !slices.Equal(got, []any{"tcp"}) {
		t.Errorf("antrea_flows ipfix.transports %v, want [tcp] (TLS; no UDP beside it)", got)
	}
	if got := at(cfg, "receivers", "antrea_flows", "ipfix", "insecure_udp"); got != nil {
		t.Errorf("antrea_flows ipfix.insecure_udp %v, want unset", got)
	}
	// flowtel's compact form, as the node collectors' records arrive: only
	// flowtel's processors read them before flow_correlation (D13, issue 44).
	if got := at(cfg, "receivers", "antrea_flows", "encoding"); got != "compact" {
		t.Errorf("antrea_flows encoding %v, want compact", got)
	}
	// The Nodes, so that a Node's own addresses are Node endpoints (D1, issue 41.4).
	if got := at(cfg, "receivers", "antrea_flows", "kubernetes", "auth_type"); got != "serviceAccount" {
		t.Errorf("antrea_flows kubernetes.auth_type %v, want serviceAccount", got)
	}
}
