package k8sindex

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
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
		return "", fmt.Errorf("cluster_uid: cannot read the UID of Namespace %s (got %w); or set cluster_uid",
			ClusterIdentityNamespace, describe(ClusterIdentity, "get", err))
	}
	if ns.UID == "" {
		return "", errors.New("cluster_uid: Namespace " + ClusterIdentityNamespace + " has no UID (got none); set cluster_uid")
	}
	return string(ns.UID), nil
}

// ClusterName holds the cluster's UID for a component that names records
// with it: configured, or read from the API server once.
type ClusterName struct {
	uid    atomic.Pointer[string]
	cancel context.CancelFunc
	done   chan struct{}
}

// Bounds of the background retries of StartClusterName without wait.
const (
	clusterUIDFirstRetry = time.Second
	clusterUIDMaxRetry   = 30 * time.Second
)

// Start takes configured, or reads the kube-system Namespace's UID once:
// with wait, at once within timeout (the error names the grant that is
// missing); without, in the background until it succeeds, UID being "" until then.
func (c *ClusterName) Start(ctx context.Context, configured string, wait bool, timeout time.Duration, client kubernetes.Interface, logger *zap.Logger) error {
	if configured != "" {
		c.uid.Store(&configured)
		return nil
	}
	if wait {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		uid, err := ClusterUID(rctx, client)
		if err != nil {
			return err
		}
		c.uid.Store(&uid)
		return nil
	}
	bctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		for wait := clusterUIDFirstRetry; ; wait = min(2*wait, clusterUIDMaxRetry) {
			uid, err := ClusterUID(bctx, client)
			if err == nil {
				c.uid.Store(&uid)
				return
			}
			logger.Warn("The cluster UID is not known until it can be read; retrying", zap.Duration("retry_in", wait), zap.Error(err))
			select {
			case <-bctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
	return nil
}

// Stop ends a background read.
func (c *ClusterName) Stop() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
		c.cancel = nil
	}
}

// UID is the cluster's UID, "" while unknown.
func (c *ClusterName) UID() string {
	if uid := c.uid.Load(); uid != nil {
		return *uid
	}
	return ""
}
