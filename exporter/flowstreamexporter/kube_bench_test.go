//go:build integration

package flowstreamexporter

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/exporter/flowstreamexporter/internal/metadata"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

// BenchmarkNamespacedStreamWarmCache: the cost of one record on a Namespace
// stream whose peers are in other Namespaces (one in full, one at the
// Identity tier, one at the Flow tier), with the decision cache warm, and
// the SubjectAccessReviews that costs (target: zero).
func BenchmarkNamespacedStreamWarmCache(b *testing.B) {
	cp := controlplane.Start(b)
	cp.ApplyClusterRoles(b, clusterRoles)
	ctx := context.Background()
	for ns, role := range map[string]string{"ns-a": "antrea-flow-viewer", "ns-b": "antrea-flow-viewer", "ns-c": "antrea-flow-identity-viewer"} {
		cp.ServiceAccount(b, ns, "unused") // creates the Namespace
		_, err := cp.Admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "bench"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "bench"}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.DelegatingServiceAccount(b, "flowtel", "gateway", false))
	if err != nil {
		b.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { controlplane.CloseIdleConnections(client) })
	tel, err := metadata.NewTelemetryBuilder(exportertest.NewNopSettings(metadata.Type).TelemetrySettings)
	if err != nil {
		b.Fatal(err)
	}
	c := createDefaultConfig().(*Config)
	a := newAccess(client, &c.Kubernetes, zap.NewNop(), tel)
	u := newUser("bench", "", []string{"system:authenticated"}, nil)
	q, err := parseRequest(&pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Follow: true})
	if err != nil {
		b.Fatal(err)
	}
	v := &viewer{access: a, user: u, scope: q.scope, verb: verbWatch}
	recs := []entry{
		makeEntry(podRecord("ns-a", "web", "ns-b", "api")), // peer in full
		makeEntry(podRecord("ns-a", "web", "ns-c", "db")),  // peer at Identity
		makeEntry(podRecord("ns-d", "x", "ns-a", "web")),   // peer at Flow
	}
	for _, e := range recs { // warm the cache
		if v.view(ctx, q, e) == nil {
			b.Fatal("record not streamed")
		}
	}
	warm := a.reviews.Load()
	tiers := []pb.EndpointDisclosure{v.view(ctx, q, recs[0]).K8S.DestinationDisclosure, v.view(ctx, q, recs[1]).K8S.DestinationDisclosure, v.view(ctx, q, recs[2]).K8S.SourceDisclosure}
	if tiers[0] != 0 || tiers[1] != 1 || tiers[2] != 2 {
		b.Fatalf("peer tiers %v, want full, identity, flow", tiers)
	}
	n := 0
	for b.Loop() {
		v.view(ctx, q, recs[n%3])
		n++
	}
	b.ReportMetric(float64(a.reviews.Load()-warm)/float64(n), "SAR/record")
	b.ReportMetric(float64(warm), "SAR-to-warm")
}
