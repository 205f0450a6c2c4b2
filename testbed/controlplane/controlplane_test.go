package controlplane

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The control plane authenticates tokens (static and ServiceAccount) and
// authorizes with RBAC (bootstrap ClusterRoles exist; aggregated ones are empty).
func TestStart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs the control-plane binaries (build.sh)")
	}
	cp := Start(t)
	ctx := context.Background()
	v, err := cp.Admin.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("server version %s, want v1.37.2", v.GitVersion)
	}
	client := func(token string) kubernetes.Interface {
		c, err := kubernetes.NewForConfig(cp.Config(token))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { CloseIdleConnections(c) })
		return c
	}
	// Not "view": aggregated ClusterRoles (view, edit, admin) stay empty
	// without the controller manager's aggregation controller.
	viewer := client(cp.ServiceAccount(t, "tb", "viewer", "cluster-admin"))
	nobody := client(cp.ServiceAccount(t, "tb", "nobody"))
	if _, err := viewer.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("ServiceAccount bound to view: %v", err)
	}
	if _, err := nobody.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("ServiceAccount without a binding: got %v, want Forbidden", err)
	}
	if _, err := client("bogus").CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("bogus token: got %v, want Unauthorized", err)
	}
}
