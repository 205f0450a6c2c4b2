package k8sflowprocessor

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/k8sindex"
)

// clusterName puts the cluster's identity, k8s.cluster.uid, on the resource
// of every record, so the exporters name the cluster (ClickHouse clusterUUID,
// the IPFIX observation domain and clusterId) without being configured.
type clusterName struct {
	uid    atomic.Pointer[string]
	cancel context.CancelFunc
	done   chan struct{}
}

// Bounds of the background retries with wait_for_sync: false.
const (
	clusterUIDFirstRetry = time.Second
	clusterUIDMaxRetry   = 30 * time.Second
)

// start takes the configured UID, or reads the kube-system Namespace's UID
// once: at once with wait_for_sync (an error fails Start, naming the grant
// that is missing), else in the background until it succeeds; records
// processed before carry no cluster UID.
func (c *clusterName) start(ctx context.Context, cfg *Config, client kubernetes.Interface, logger *zap.Logger) error {
	if cfg.ClusterUID != "" {
		c.uid.Store(&cfg.ClusterUID)
		return nil
	}
	if cfg.WaitForSync {
		rctx, cancel := context.WithTimeout(ctx, cfg.WaitForSyncTimeout)
		defer cancel()
		uid, err := k8sindex.ClusterUID(rctx, client)
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
			uid, err := k8sindex.ClusterUID(bctx, client)
			if err == nil {
				c.uid.Store(&uid)
				return
			}
			logger.Warn("Records carry no k8s.cluster.uid until it can be read; retrying", zap.Duration("retry_in", wait), zap.Error(err))
			select {
			case <-bctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
	return nil
}

func (c *clusterName) stop() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
		c.cancel = nil
	}
}

// name sets k8s.cluster.uid on rl's resource, once the UID is known.
func (c *clusterName) name(rl plog.ResourceLogs) {
	if uid := c.uid.Load(); uid != nil {
		rl.Resource().Attributes().PutStr(flowrecord.ResourceClusterUID, *uid)
	}
}
