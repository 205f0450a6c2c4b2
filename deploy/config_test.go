//go:build integration

package deploy_test

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flowtel/flowtel/distributions"
)

// rendered is one way of deploying flowtel, rendered to objects.
type rendered struct {
	name string
	objs []*unstructured.Unstructured
}

func kustomizeVariants(t *testing.T) []rendered {
	var out []rendered
	for _, dir := range []string{".", "examples/clickhouse", "examples/other-namespace", "examples/no-client-auth", "examples/cert-manager"} {
		name := "kustomize " + dir
		if dir == "." {
			name = "kustomize deploy/kubernetes"
		}
		out = append(out, rendered{name, objects(t, kustomize(t, dir))})
	}
	return out
}

// Who may write flows: every variant's gateway requires node collectors'
// client certificates (mTLS), except the named opt-outs below.
const (
	optOutNoClientAuth = "no-client-auth" // TLS, no client certificates
	optOutPlaintext    = "plaintext"      // no TLS at all
)

// optOuts are the variants, by name, that opt out of node collector
// authentication, and how.
var optOuts = map[string]string{
	"kustomize examples/no-client-auth":           optOutNoClientAuth,
	"helm template ci/no-client-auth-values.yaml": optOutNoClientAuth,
	"helm template ci/dns-plaintext-values.yaml":  optOutPlaintext,
}

// countingTLS is the extension that serves, and counts, the TLS of the
// gateway's OTLP port (extension/servertlsextension).
const countingTLS = "server_tls"

// gatewayServerTLS is the TLS the gateway's OTLP port serves: the server_tls
// extension's when the receiver lists it as middleware (its credentials
// replace the receiver's), else the receiver's own tls block; nil for
// plaintext.
func gatewayServerTLS(gwRaw map[string]any) map[string]any {
	if listsMiddleware(gwRaw) {
		m, _ := at(gwRaw, "extensions", countingTLS, "tls").(map[string]any)
		return m
	}
	m, _ := at(gwRaw, "receivers", "otlp", "protocols", "grpc", "tls").(map[string]any)
	return m
}

// listsMiddleware: the gateway's OTLP receiver lists server_tls in its
// middlewares.
func listsMiddleware(gwRaw map[string]any) bool {
	return slices.ContainsFunc(anys(at(gwRaw, "receivers", "otlp", "protocols", "grpc", "middlewares")), func(m any) bool {
		e, _ := m.(map[string]any)
		return e["id"] == countingTLS
	})
}

// checkClientAuth: the gateway's OTLP port requires a client certificate
// chaining to a CA file, unless the variant is a named opt-out, which then
// does what its name says. With TLS, the port's TLS is served and counted by
// the server_tls middleware, and the receiver's own tls block (used only if
// the middleware is removed) has the same settings.
func checkClientAuth(t *testing.T, variant string, gw collector, gwRaw map[string]any) {
	t.Helper()
	serverTLS := gatewayServerTLS(gwRaw)
	clientCA, _ := serverTLS["client_ca_file"].(string)
	switch optOuts[variant] {
	case "":
		if serverTLS == nil || clientCA == "" {
			t.Errorf("%s: the gateway's OTLP port does not require client certificates (tls %v): any Pod reaching it can write flows", gw.source, serverTLS)
		}
	case optOutNoClientAuth:
		if serverTLS == nil || clientCA != "" {
			t.Errorf("%s: opt-out %s, but tls is %v", gw.source, optOutNoClientAuth, serverTLS)
		}
	case optOutPlaintext:
		if serverTLS != nil {
			t.Errorf("%s: opt-out %s, but tls is %v", gw.source, optOutPlaintext, serverTLS)
		}
		return
	}
	if !listsMiddleware(gwRaw) {
		t.Errorf("%s: the OTLP receiver does not list the %s middleware: refused handshakes are not counted", gw.source, countingTLS)
	}
	if !slices.Contains(anys(at(gwRaw, "service", "extensions")), any(countingTLS)) {
		t.Errorf("%s: service.extensions %v lacks %s", gw.source, at(gwRaw, "service", "extensions"), countingTLS)
	}
	if own := at(gwRaw, "receivers", "otlp", "protocols", "grpc", "tls"); fmt.Sprint(own) != fmt.Sprint(serverTLS) {
		t.Errorf("%s: the receiver's tls %v (used without the middleware) differs from %s's %v", gw.source, own, countingTLS, serverTLS)
	}
}

func anys(v any) []any {
	list, _ := v.([]any)
	return list
}

func helmVariants(t *testing.T) []rendered {
	var out []rendered
	for _, v := range chartValueSets {
		out = append(out, rendered{"helm template " + v, objects(t, helmTemplate(t, "flowtel", "flowtel", v))})
	}
	return out
}

// The kustomize base and its example overlay: one node and one gateway
// collector each, valid configurations, and the shape docs/deploy.md describes.
func TestKustomizeCollectors(t *testing.T) {
	for _, r := range kustomizeVariants(t) {
		t.Run(r.name, func(t *testing.T) { checkWorkloads(t, r) })
	}
}

func TestHelmCollectors(t *testing.T) {
	for _, r := range helmVariants(t) {
		t.Run(r.name, func(t *testing.T) { checkWorkloads(t, r) })
	}
}

func TestHelmLint(t *testing.T) {
	for _, v := range chartValueSets {
		args := []string{"lint", "--strict", chartDir()}
		if v != "" {
			args = append(args, "--values", chartDir()+"/"+v)
		}
		out := run(t, nil, helm(t), args...)
		if !strings.Contains(string(out), "0 chart(s) failed") {
			t.Errorf("helm lint %s:\n%s", v, out)
		}
	}
}

// Values the chart cannot honour fail rendering, naming the value
// (values.schema.json), instead of producing a collector that will not start.
func TestHelmRejectsBadValues(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"gateway.resolver=static", "/gateway/resolver"},
		{"sinks.ipfix.transport=sctp", "/sinks/ipfix/transport"},
		{"sinks.clickhouse.endpoint=http://ch:8123", "/sinks/clickhouse/endpoint"},
		{"gateway.replicas=0", "/gateway/replicas"},
		{"sinks.kafka.enabled=true", "kafka"},
		{"gateway.resources.limits.memory=2.5Gi", "gateway.resources.limits.memory"}, // GOMEMLIMIT is computed from it
	} {
		out, err := runErr(nil, helm(t), "template", "x", chartDir(), "--set", tc.set)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s: want an error naming %s, got %v\n%s", tc.set, tc.want, err, out)
		}
	}
}

func checkWorkloads(t *testing.T, r rendered) {
	byDist := map[string][]collector{}
	for _, c := range workloadCollectors(t, r.name, r.objs) {
		byDist[c.dist] = append(byDist[c.dist], c)
	}
	if len(byDist[distributions.Node]) != 1 || len(byDist[distributions.Gateway]) != 1 {
		t.Fatalf("want one node and one gateway collector, got %d and %d", len(byDist[distributions.Node]), len(byDist[distributions.Gateway]))
	}
	node, gw := byDist[distributions.Node][0], byDist[distributions.Gateway][0]
	nodeRaw, gwRaw := node.validate(t), gw.validate(t)
	if nodeRaw == nil || gwRaw == nil {
		return
	}
	checkNodePod(t, node, nodeRaw)
	checkGatewayPod(t, gw, gwRaw)
	checkResolverTarget(t, r.objs, nodeRaw, gw)
	gwCtr := containerNamed(t, gw.source, gw.pod.Spec.Containers, "collector")
	checkGatewayDrain(t, gw.source, nodeRaw, gwCtr.Lifecycle, gw.pod.Spec.TerminationGracePeriodSeconds)
	checkTLSPairing(t, nodeRaw, gwRaw)
	checkClientAuth(t, r.name, gw, gwRaw)
	checkPDB(t, r.objs, gw)
	checkSinks(t, gw, gwRaw)
	checkBinding(t, r.objs, node)
	checkCertificatesOwner(t, r.objs, gw, gwRaw)
	if gatewayIndex(gwRaw) {
		checkBinding(t, r.objs, gw)
	}
}

// gatewayIndex: the gateway's flow_correlation keeps a Kubernetes index
// (its kubernetes section is present, even empty).
func gatewayIndex(raw map[string]any) bool {
	fc, _ := at(raw, "processors", "flow_correlation").(map[string]any)
	_, on := fc["kubernetes"]
	return on
}

// checkCertificatesOwner: where the gateway runs k8s_certificates, the
// Secrets belong to the gateway Pods' own ServiceAccount, one of the
// manifests: it lives as long as the install, so uninstalling deletes them.
func checkCertificatesOwner(t *testing.T, objs []*unstructured.Unstructured, gw collector, raw map[string]any) {
	t.Helper()
	if at(raw, "extensions", "k8s_certificates") == nil {
		return
	}
	sa := gw.pod.Spec.ServiceAccountName
	if got := at(raw, "extensions", "k8s_certificates", "owner_service_account"); got != sa {
		t.Errorf("%s: k8s_certificates owner_service_account %v, want the gateway Pods' ServiceAccount %q", gw.source, got, sa)
	}
	if !slices.ContainsFunc(find(objs, "ServiceAccount"), func(o *unstructured.Unstructured) bool {
		return o.GetNamespace() == gw.namespace && o.GetName() == sa
	}) {
		t.Errorf("%s: ServiceAccount %s/%s, the certificate Secrets' owner, is not in the manifests", gw.source, gw.namespace, sa)
	}
}

// A collector's ServiceAccount exists in its namespace and a
// ClusterRoleBinding binds exactly that account (namespace included) to a
// ClusterRole of the same manifests.
func checkBinding(t *testing.T, objs []*unstructured.Unstructured, node collector) {
	t.Helper()
	sa := node.pod.Spec.ServiceAccountName
	exists := func(kind, namespace, name string) bool {
		return slices.ContainsFunc(find(objs, kind), func(o *unstructured.Unstructured) bool {
			return o.GetNamespace() == namespace && o.GetName() == name
		})
	}
	if !exists("ServiceAccount", node.namespace, sa) {
		t.Errorf("%s: ServiceAccount %s/%s is not in the manifests", node.source, node.namespace, sa)
	}
	for _, o := range find(objs, "ClusterRoleBinding") {
		var b rbacv1.ClusterRoleBinding
		convert(t, o, &b)
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == node.namespace && exists("ClusterRole", "", b.RoleRef.Name) {
				return
			}
		}
	}
	t.Errorf("%s: no ClusterRoleBinding binds ServiceAccount %s/%s to a shipped ClusterRole", node.source, node.namespace, sa)
}

// The node collector: host network, root with only NET_ADMIN added, read-only
// root filesystem, K8S_NODE_NAME from the downward API, probes on the
// health_check port, requests and limits, and it tolerates every taint.
func checkNodePod(t *testing.T, c collector, raw map[string]any) {
	t.Helper()
	spec := c.pod.Spec
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("%s: hostNetwork %v, dnsPolicy %q; want true, ClusterFirstWithHostNet", c.source, spec.HostNetwork, spec.DNSPolicy)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == ""
	}) {
		t.Errorf("%s: no toleration {operator: Exists} for every taint: %v", c.source, spec.Tolerations)
	}
	ctr := containerNamed(t, c.source, spec.Containers, "collector")
	sc := ctr.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		(sc.Privileged != nil && *sc.Privileged) {
		t.Errorf("%s: securityContext %+v; want runAsUser 0, add [NET_ADMIN], drop [ALL], read-only root, no escalation", c.source, sc)
	}
	if !slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool {
		return e.Name == "K8S_NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Errorf("%s: K8S_NODE_NAME is not spec.nodeName from the downward API", c.source)
	}
	if got := at(raw, "processors", "k8s_flow", "node_name"); got != "node-1" {
		t.Errorf("%s: k8s_flow node_name resolves to %v, want the Node's name", c.source, got)
	}
	checkProbesAndResources(t, c, ctr, raw)
}

func checkGatewayPod(t *testing.T, c collector, raw map[string]any) {
	t.Helper()
	spec := c.pod.Spec
	ctr := containerNamed(t, c.source, spec.Containers, "collector")
	nonRoot := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	sc := ctr.SecurityContext
	if !nonRoot || sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("%s: want non-root, read-only root filesystem, every capability dropped", c.source)
	}
	mounted := spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken
	if index := gatewayIndex(raw); mounted != index {
		t.Errorf("%s: token mounted %v, flow_correlation kubernetes index %v: the gateway reads the API server only for the index", c.source, mounted, index)
	}
	checkProbesAndResources(t, c, ctr, raw)
}

// checkGatewayDrain: a gateway replica being replaced or removed goes on
// taking the node collectors' exports until their resolver has dropped it
// (a preStop sleep as long as that resolver needs at least), and its grace
// period leaves a minute after that to export what it holds. Without the
// drain, an export the stopping replica refused reached its successor out of
// order with what the keys' new owner took meanwhile: a range counted by no
// gateway (a real-cluster rollout lost 3 s of two downloads).
func checkGatewayDrain(t *testing.T, source string, nodeRaw map[string]any, lc *corev1.Lifecycle, grace *int64) {
	t.Helper()
	need := int64(5) // the k8s resolver watches the EndpointSlices
	if _, dns := at(nodeRaw, "exporters", "load_balancing", "resolver", "dns").(map[string]any); dns {
		need = 15 // the dns resolver polls every 5 s, and the records live 5 s more
	}
	var drain int64
	if lc != nil && lc.PreStop != nil && lc.PreStop.Sleep != nil {
		drain = lc.PreStop.Sleep.Seconds
	}
	if drain < need {
		t.Errorf("%s: the gateway drains %d s before it stops (preStop sleep), the node collectors' resolver needs %d s to drop it", source, drain, need)
	}
	if grace == nil || *grace < drain+60 {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want the %d s drain and a minute to export what the gateway holds", source, grace, drain)
	}
}

func checkProbesAndResources(t *testing.T, c collector, ctr *corev1.Container, raw map[string]any) {
	t.Helper()
	ep, _ := at(raw, "extensions", "health_check", "endpoint").(string)
	_, healthPort, err := net.SplitHostPort(ep)
	if err != nil {
		t.Errorf("%s: health_check endpoint %q: %v", c.source, ep, err)
		return
	}
	for name, p := range map[string]*corev1.Probe{"liveness": ctr.LivenessProbe, "readiness": ctr.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", c.source, name)
			continue
		}
		if got := probePort(ctr, p.HTTPGet.Port); got != healthPort {
			t.Errorf("%s: %s probe on port %s, health_check listens on %s", c.source, name, got, healthPort)
		}
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := ctr.Resources.Requests[res]; !ok {
			t.Errorf("%s: no %s request", c.source, res)
		}
		if _, ok := ctr.Resources.Limits[res]; !ok {
			t.Errorf("%s: no %s limit", c.source, res)
		}
	}
}

func probePort(ctr *corev1.Container, port intstr.IntOrString) string {
	if port.Type == intstr.Int {
		return strconv.Itoa(port.IntValue())
	}
	for _, p := range ctr.Ports {
		if p.Name == port.StrVal {
			return strconv.Itoa(int(p.ContainerPort))
		}
	}
	return "unknown port " + port.StrVal
}

// The load_balancing exporter routes on flow.key to the gateway's headless
// Service: the Service the resolver names exists, is headless, selects the
// gateway Pods and serves the OTLP port.
func checkResolverTarget(t *testing.T, objs []*unstructured.Unstructured, nodeRaw map[string]any, gw collector) {
	t.Helper()
	lb := "exporters.load_balancing"
	if got := fmt.Sprintf("%v %v", at(nodeRaw, "exporters", "load_balancing", "routing_key"), at(nodeRaw, "exporters", "load_balancing", "routing_attributes")); got != "attributes [flow.key]" {
		t.Errorf("%s routes on %s, want attributes [flow.key]", lb, got)
	}
	var name, namespace, port string
	if svc, ok := at(nodeRaw, "exporters", "load_balancing", "resolver", "k8s", "service").(string); ok {
		name, namespace, _ = strings.Cut(svc, ".")
		port = fmt.Sprint(at(nodeRaw, "exporters", "load_balancing", "resolver", "k8s", "ports"))
		port = strings.Trim(port, "[]")
	} else if host, ok := at(nodeRaw, "exporters", "load_balancing", "resolver", "dns", "hostname").(string); ok {
		parts := strings.Split(host, ".")
		if len(parts) < 3 || parts[2] != "svc" {
			t.Fatalf("dns resolver hostname %q is not <service>.<namespace>.svc...", host)
		}
		name, namespace = parts[0], parts[1]
		port = fmt.Sprint(at(nodeRaw, "exporters", "load_balancing", "resolver", "dns", "port"))
	} else {
		t.Fatalf("%s.resolver is neither k8s nor dns: %v", lb, at(nodeRaw, "exporters", "load_balancing", "resolver"))
	}
	if namespace != gw.namespace {
		t.Errorf("the resolver looks in namespace %q, the gateway runs in %q", namespace, gw.namespace)
	}
	for _, o := range find(objs, "Service") {
		if o.GetName() != name || o.GetNamespace() != namespace {
			continue
		}
		var svc corev1.Service
		convert(t, o, &svc)
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("Service %s is not headless: a virtual IP would split the halves of connections", name)
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(gw.pod.Labels)) || len(svc.Spec.Selector) == 0 {
			t.Errorf("Service %s selector %v does not select the gateway Pods %v", name, svc.Spec.Selector, gw.pod.Labels)
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == port }) {
			t.Errorf("Service %s has no port %s", name, port)
		}
		return
	}
	t.Errorf("the resolver's Service %s/%s is not in the manifests", namespace, name)
}

// TLS on one side means TLS on the other; a client certificate is sent
// exactly when the gateway asks for one.
func checkTLSPairing(t *testing.T, nodeRaw, gwRaw map[string]any) {
	t.Helper()
	clientTLS, _ := at(nodeRaw, "exporters", "load_balancing", "protocol", "otlp", "tls").(map[string]any)
	serverTLS := gatewayServerTLS(gwRaw)
	insecure := clientTLS != nil && clientTLS["insecure"] == true
	if insecure != (serverTLS == nil) {
		t.Errorf("node TLS %v does not match gateway TLS %v", clientTLS, serverTLS)
	}
	if serverTLS == nil {
		return
	}
	if s, _ := clientTLS["server_name_override"].(string); !strings.HasPrefix(s, "flowtel-gateway.") && !strings.Contains(s, "-gateway.") {
		t.Errorf("node TLS server_name_override %q does not name the gateway Service", s)
	}
	clientCert := clientTLS["cert_file"] != nil && clientTLS["cert_file"] != ""
	clientCA := serverTLS["client_ca_file"] != nil && serverTLS["client_ca_file"] != ""
	if clientCert != clientCA {
		t.Errorf("mTLS half configured: node cert_file %v, gateway client_ca_file %v", clientTLS["cert_file"], serverTLS["client_ca_file"])
	}
}

func checkPDB(t *testing.T, objs []*unstructured.Unstructured, gw collector) {
	t.Helper()
	replicas := 0
	for _, o := range find(objs, "StatefulSet") {
		r, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
		replicas = int(r)
	}
	pdbs := find(objs, "PodDisruptionBudget")
	if replicas <= 1 && len(pdbs) == 0 {
		return // a budget on one replica would block every drain
	}
	for _, o := range pdbs {
		var pdb policyv1.PodDisruptionBudget
		convert(t, o, &pdb)
		sel := labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels)
		if sel.Matches(labels.Set(gw.pod.Labels)) {
			return
		}
	}
	t.Errorf("no PodDisruptionBudget selects the gateway Pods %v", gw.pod.Labels)
}

// Every exporter defined is used; ClickHouse credentials come from a Secret.
func checkSinks(t *testing.T, gw collector, raw map[string]any) {
	t.Helper()
	logs := fmt.Sprint(at(raw, "service", "pipelines", "logs", "exporters"))
	if _, ok := at(raw, "exporters", "clickhouse_flows").(map[string]any); ok {
		if !strings.Contains(logs, "clickhouse_flows") {
			t.Errorf("%s: clickhouse_flows is defined but not in the logs pipeline %s", gw.source, logs)
		}
		if !strings.HasPrefix(gw.env["CH_PASSWORD"], "secret-") {
			t.Errorf("%s: ClickHouse password not from a Secret (CH_PASSWORD=%q)", gw.source, gw.env["CH_PASSWORD"])
		}
	}
}
