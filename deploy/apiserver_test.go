//go:build integration

package deploy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/flowtel/flowtel/internal/k8sclient"
	"github.com/flowtel/flowtel/internal/k8sindex"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor"
	"github.com/flowtel/flowtel/processor/k8sflowprocessor"
	"github.com/flowtel/flowtel/testbed/controlplane"
	"github.com/flowtel/flowtel/testbed/kube"
)

// cluster is a real kube-apiserver and a kubeconfig for kubectl.
type cluster struct {
	*controlplane.ControlPlane
	kubeconfig string
}

// startCluster starts one that also enforces who may set owners, as OpenShift
// does (OwnerReferencesPermissionEnforcement): the k8s_certificates extension
// adds its owner to Secrets made before with the shipped Role alone.
func startCluster(t *testing.T) cluster {
	t.Helper()
	kubectl(t)
	cp := controlplane.StartWith(t, controlplane.Options{ExtraArgs: []string{"--enable-admission-plugins=OwnerReferencesPermissionEnforcement"}})
	return cluster{cp, cp.Kubeconfig(t, "admin", cp.AdminToken)}
}

func (c cluster) kubectl(stdin []byte, args ...string) ([]byte, error) {
	return runErr(stdin, "kubectl", append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
}

// apply is `kubectl apply --server-side` of a manifest stream: every object
// must be accepted (schema, defaulting, validation, admission).
func (c cluster) apply(t *testing.T, what string, manifests []byte) {
	t.Helper()
	if out, err := c.kubectl(manifests, "apply", "--server-side", "--field-manager=flowtel-deploy-test", "-f", "-"); err != nil {
		t.Fatalf("%s not accepted: %v\n%s", what, err, out)
	}
}

// rejects checks that the API server refuses a broken copy: proof that the
// acceptance above is the server's validation, not a pass-through.
func (c cluster) rejects(t *testing.T, what string, manifests []byte, from, to string) {
	t.Helper()
	broken := strings.Replace(string(manifests), from, to, 1)
	if broken == string(manifests) {
		t.Fatalf("%s: %q not found to break", what, from)
	}
	if out, err := c.kubectl([]byte(broken), "apply", "--server-side", "--dry-run=server", "--field-manager=flowtel-deploy-test", "-f", "-"); err == nil {
		t.Errorf("%s with %q accepted:\n%s", what, to, out)
	}
}

func TestAPIServerAcceptsKustomize(t *testing.T) {
	c := startCluster(t)
	base := kustomize(t, ".")
	c.apply(t, "deploy/kubernetes", base)
	if strings.Contains(string(base), "privileged: true") || strings.Contains(string(base), "initContainers") {
		t.Error("deploy/kubernetes: an init container or a privileged container (the node collector sets the conntrack sysctls itself)")
	}
	c.apply(t, "deploy/kubernetes/examples/clickhouse", kustomize(t, "examples/clickhouse"))
	c.apply(t, "deploy/kubernetes/examples/no-client-auth", kustomize(t, "examples/no-client-auth"))
	c.rejects(t, "deploy/kubernetes", base, "maxUnavailable: 10%", "maxUnavailable: ten")

	checkNodeRBAC(t, c, "flowtel", "flowtel-node")
	checkGatewayRBAC(t, c, "flowtel", "flowtel-gateway", true)

	// Moved to another namespace: the binding follows the ServiceAccount.
	c.apply(t, "deploy/kubernetes/examples/other-namespace", kustomize(t, "examples/other-namespace"))
	checkNodeRBAC(t, c, "netflows", "flowtel-node")
}

func TestAPIServerAcceptsHelmTemplate(t *testing.T) {
	helm(t) // build it before the API server starts: it takes minutes when cold
	c := startCluster(t)
	for i, v := range chartValueSets {
		ns, release := fmt.Sprintf("helm-%d", i), fmt.Sprintf("lab-%d", i)
		if out, err := c.kubectl(nil, "create", "namespace", ns); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		manifests := helmTemplate(t, release, ns, v)
		// The node collector sets the conntrack sysctls itself: no values
		// set needs a privileged container.
		if strings.Contains(string(manifests), "privileged: true") {
			t.Errorf("helm template %s: a privileged container", v)
		}
		c.apply(t, "helm template "+v, manifests)
		checkNodeRBAC(t, c, ns, release+"-flowtel-node")
		// node_identity, and the right to review tokens, unless the values turn it off.
		checkGatewayRBAC(t, c, ns, release+"-flowtel-gateway", strings.Contains(string(manifests), "node_identity:"))
	}
	checkUpgradeKeepsStorage(t, c)
}

// checkUpgradeKeepsStorage: `helm upgrade` renders the node collectors'
// storage directory their DaemonSet already mounts (the chart looks it up),
// so an upgrade resumes from it: also a release installed with the chart's
// former default, /var/lib/flowtel, which it keeps; a new release beside it
// gets a directory of its own. Without cluster access (helm template) the
// default is rendered.
func checkUpgradeKeepsStorage(t *testing.T, c cluster) {
	t.Helper()
	queuePath := func(manifests []byte) string {
		for _, o := range find(objects(t, manifests), "DaemonSet") {
			vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if m, _ := v.(map[string]any); m["name"] == "queue" {
					p, _, _ := unstructured.NestedString(m, "hostPath", "path")
					return p
				}
			}
		}
		t.Fatal("no DaemonSet with a queue volume")
		return ""
	}
	// As `helm upgrade` renders: with the cluster, for lookup.
	upgrade := func(release, ns string, set ...string) []byte {
		args := []string{"template", release, chartDir(), "--namespace", ns, "--dry-run=server", "--kubeconfig", c.kubeconfig}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		return run(t, nil, helm(t), args...)
	}
	const ns = "helm-upgrade"
	if out, err := c.kubectl(nil, "create", "namespace", ns); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Installed by a chart whose default was /var/lib/flowtel for every release.
	c.apply(t, "release old, former default", upgrade("old", ns, "node.storageHostPath=/var/lib/flowtel"))
	if got := queuePath(upgrade("old", ns)); got != "/var/lib/flowtel" {
		t.Errorf("upgrading release old: storage directory %s, want the one it has, /var/lib/flowtel", got)
	}
	if got := queuePath(helmTemplate(t, "old", ns, "")); got != "/var/lib/flowtel/"+ns+"/old" {
		t.Errorf("helm template of release old (no cluster): storage directory %s, want the default", got)
	}
	// A new release: its own directory, which its upgrades keep.
	newRelease := upgrade("new", ns)
	if got := queuePath(newRelease); got != "/var/lib/flowtel/"+ns+"/new" {
		t.Errorf("installing release new beside old: storage directory %s, want /var/lib/flowtel/%s/new", got, ns)
	}
	c.apply(t, "release new", newRelease)
	if got := queuePath(upgrade("new", ns)); got != "/var/lib/flowtel/"+ns+"/new" {
		t.Errorf("upgrading release new: storage directory %s, want /var/lib/flowtel/%s/new", got, ns)
	}
	// A value set explicitly wins over the lookup.
	if got := queuePath(upgrade("old", ns, "node.storageHostPath=/data/flowtel")); got != "/data/flowtel" {
		t.Errorf("upgrading release old with node.storageHostPath=/data/flowtel: storage directory %s", got)
	}
}

// operatorCRD returns the path of the OpenTelemetryCollector CRD of the
// Operator release the tests use (kube.OperatorModule).
func operatorCRD(t *testing.T) string {
	t.Helper()
	dir, err := kube.OperatorDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "config", "crd", "bases", "opentelemetry.io_opentelemetrycollectors.yaml")
}

func TestAPIServerAcceptsOperatorCRs(t *testing.T) {
	c := startCluster(t)
	installOperatorCRD(t, c)
	c.apply(t, "operator/rbac.yaml", readFile(t, "operator/rbac.yaml"))
	node := readFile(t, "operator/node.yaml")
	c.apply(t, "operator/node.yaml", node)
	c.apply(t, "operator/gateway.yaml", readFile(t, "operator/gateway.yaml"))
	c.rejects(t, "operator/node.yaml", node, "mode: daemonset", "mode: everywhere")

	checkNodeRBAC(t, c, "flowtel", "flowtel-node")
	checkGatewayRBAC(t, c, "flowtel", "flowtel-gateway", true)
}

// installOperatorCRD installs the Operator's OpenTelemetryCollector CRD and
// waits until the API server serves it.
func installOperatorCRD(t *testing.T, c cluster) {
	t.Helper()
	crd := operatorCRD(t)
	if out, err := c.kubectl(nil, "apply", "--server-side", "-f", crd); err != nil {
		t.Fatalf("installing the Operator's CRD: %v\n%s", err, out)
	}
	established := func() bool {
		out, err := c.kubectl(nil, "get", "crd/opentelemetrycollectors.opentelemetry.io", "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		return err == nil && string(out) == "True"
	}
	for deadline := time.Now().Add(60 * time.Second); !established(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Operator's CRD is not Established after 60 s")
		}
	}
}

func serviceAccountUser(namespace, name string) (string, []string) {
	return "system:serviceaccount:" + namespace + ":" + name,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

// allowed asks the API server's authorizer (SubjectAccessReview) whether the
// ServiceAccount may do verb on resource.
func allowed(t *testing.T, c cluster, namespace, name string, attrs authzv1.ResourceAttributes) bool {
	t.Helper()
	user, groups := serviceAccountUser(namespace, name)
	sar, err := c.Admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// checkNodeRBAC: with only the shipped ClusterRole, the node collector's
// ServiceAccount can get/list/watch every resource k8s_flow reads (and the
// gateway's EndpointSlices for the k8s resolver), the real k8s_flow processor
// starts and syncs with its token, and it can neither read Secrets nor write.
func checkNodeRBAC(t *testing.T, c cluster, namespace, sa string) {
	t.Helper()
	for _, res := range slices.Concat(k8sindex.Watched, k8sindex.PolicyWatched, k8sindex.AdminPolicyWatched) {
		for _, verb := range []string{"get", "list", "watch"} {
			if !allowed(t, c, namespace, sa, authzv1.ResourceAttributes{Verb: verb, Group: res.Group, Resource: res.Resource}) {
				t.Errorf("%s/%s may not %s %s cluster-wide; k8s_flow needs it", namespace, sa, verb, res)
			}
		}
	}
	for _, verb := range []string{"list", "watch"} {
		if !allowed(t, c, namespace, sa, authzv1.ResourceAttributes{Verb: verb, Group: "discovery.k8s.io", Resource: "endpointslices", Namespace: namespace}) {
			t.Errorf("%s/%s may not %s endpointslices in %s (load_balancing k8s resolver)", namespace, sa, verb, namespace)
		}
	}
	if !allowed(t, c, namespace, sa, authzv1.ResourceAttributes{Verb: "get", Resource: k8sindex.ClusterIdentity.Resource, Name: k8sindex.ClusterIdentityNamespace}) {
		t.Errorf("%s/%s may not get namespace %s (k8s_flow's cluster UID)", namespace, sa, k8sindex.ClusterIdentityNamespace)
	}
	denied := []authzv1.ResourceAttributes{
		{Verb: "get", Resource: "secrets", Namespace: namespace},
		{Verb: "list", Resource: "secrets"},
		{Verb: "watch", Resource: "secrets", Namespace: "kube-system"},
		{Verb: "list", Resource: "configmaps"},
		{Verb: "create", Resource: "pods", Namespace: namespace},
		{Verb: "delete", Resource: "pods", Namespace: namespace},
		{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: namespace},
		{Verb: "update", Resource: "nodes"},
		{Verb: "list", Group: "apps", Resource: "deployments"},
	}
	for _, a := range denied {
		if allowed(t, c, namespace, sa, a) {
			t.Errorf("%s/%s may %s %s %s in %q; it should not", namespace, sa, a.Verb, a.Resource, a.Subresource, a.Namespace)
		}
	}

	token := serviceAccountToken(t, c, namespace, sa)
	client, err := kubernetes.NewForConfig(c.Config(token))
	if err != nil {
		t.Fatal(err)
	}
	defer controlplane.CloseIdleConnections(client)
	if _, err := client.CoreV1().Secrets(namespace).List(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("%s/%s token listing Secrets: %v, want Forbidden", namespace, sa, err)
	}
	startK8sFlow(t, c, namespace, sa, token)
}

// startK8sFlow runs the real k8s_flow processor with the ServiceAccount's
// token: Start lists every resource and waits for the informers' caches.
func startK8sFlow(t *testing.T, c cluster, namespace, sa, token string) {
	t.Helper()
	factory := k8sflowprocessor.NewFactory()
	cfg := factory.CreateDefaultConfig().(*k8sflowprocessor.Config)
	cfg.NodeName = "node-1"
	cfg.AuthType = k8sclient.AuthKubeConfig
	cfg.KubeConfig = c.Kubeconfig(t, namespace+"-"+sa, token)
	cfg.WaitForSync = true
	cfg.WaitForSyncTimeout = 30 * time.Second
	p, err := factory.CreateLogs(context.Background(), processortest.NewNopSettings(component.MustNewType("k8s_flow")), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Errorf("k8s_flow with %s/%s's token and only the shipped ClusterRole: %v", namespace, sa, err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// serviceAccountToken asks the TokenRequest API for a token of an existing
// ServiceAccount (the one the manifests created).
func serviceAccountToken(t *testing.T, c cluster, namespace, name string) string {
	t.Helper()
	ttl := int64(3600)
	tr, err := c.Admin.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// checkGatewayRBAC: the gateway's ServiceAccount may read what
// flow_correlation's kubernetes index reads, the real processor starts and
// syncs with its token, it may create TokenReviews exactly when its
// configuration runs node_identity, and it can neither read Secrets nor write.
func checkGatewayRBAC(t *testing.T, c cluster, namespace, sa string, nodeIdentity bool) {
	t.Helper()
	for _, res := range k8sindex.Watched {
		for _, verb := range []string{"get", "list", "watch"} {
			if !allowed(t, c, namespace, sa, authzv1.ResourceAttributes{Verb: verb, Group: res.Group, Resource: res.Resource}) {
				t.Errorf("%s/%s may not %s %s cluster-wide; the gateway's kubernetes index needs it", namespace, sa, verb, res)
			}
		}
	}
	if !allowed(t, c, namespace, sa, authzv1.ResourceAttributes{Verb: "get", Resource: k8sindex.ClusterIdentity.Resource, Name: k8sindex.ClusterIdentityNamespace}) {
		t.Errorf("%s/%s may not get namespace %s (the cluster UID)", namespace, sa, k8sindex.ClusterIdentityNamespace)
	}
	switch may := allowed(t, c, namespace, sa, authzv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}); {
	case nodeIdentity && !may:
		t.Errorf("%s/%s may not create tokenreviews; node_identity reviews the node collectors' tokens (system:auth-delegator)", namespace, sa)
	case !nodeIdentity && may:
		t.Errorf("%s/%s may create tokenreviews without node_identity in its configuration", namespace, sa)
	}
	for _, a := range []authzv1.ResourceAttributes{
		{Verb: "get", Resource: "secrets", Namespace: namespace},
		{Verb: "list", Resource: "configmaps"},
		{Verb: "create", Resource: "pods", Namespace: namespace},
		{Verb: "update", Resource: "nodes"},
	} {
		if allowed(t, c, namespace, sa, a) {
			t.Errorf("%s/%s may %s %s in %q; it should not", namespace, sa, a.Verb, a.Resource, a.Namespace)
		}
	}
	token := serviceAccountToken(t, c, namespace, sa)
	factory := flowcorrelationprocessor.NewFactory()
	cfg := factory.CreateDefaultConfig().(*flowcorrelationprocessor.Config)
	index := cfg.Kubernetes.GetOrInsertDefault()
	index.AuthType, index.KubeConfig = k8sclient.AuthKubeConfig, c.Kubeconfig(t, namespace+"-"+sa, token)
	index.WaitForSyncTimeout = 30 * time.Second
	p, err := factory.CreateLogs(context.Background(), processortest.NewNopSettings(component.MustNewType("flow_correlation")), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Errorf("flow_correlation's kubernetes index with %s/%s's token and only the shipped RBAC: %v", namespace, sa, err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}
