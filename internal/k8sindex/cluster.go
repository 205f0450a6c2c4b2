package k8sindex

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ClusterIdentityNamespace is the Namespace whose UID names the cluster:
// every cluster has it, it is never deleted, and its UID is unique per
// cluster (the convention of OpenTelemetry's k8s.cluster.uid).
const ClusterIdentityNamespace = "kube-system"

// ClusterIdentity is the resource read to name the cluster; the
// ClusterRole grants get on it, for the one Namespace only.
var ClusterIdentity = Resource{"", "namespaces"}

// ClusterUID reads the UID of the kube-system Namespace. The error names
// the resource, the verb and what to grant or configure instead.
func ClusterUID(ctx context.Context, client kubernetes.Interface) (string, error) {
	ns, err := client.CoreV1().Namespaces().Get(ctx, ClusterIdentityNamespace, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the cluster UID (Namespace %s; or set cluster_uid): %w",
			ClusterIdentityNamespace, describe(ClusterIdentity, "get", err))
	}
	if ns.UID == "" {
		return "", errors.New("reading the cluster UID: Namespace " + ClusterIdentityNamespace + " has no UID")
	}
	return string(ns.UID), nil
}
