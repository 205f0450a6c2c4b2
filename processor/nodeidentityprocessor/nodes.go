package nodeidentityprocessor

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/flowtel/flowtel/internal/k8sindex"
)

// nodeAddresses gives a Node's own addresses (decision D1), or an error when
// they are not known yet: the caller must not judge an address then.
type nodeAddresses interface {
	addresses(ctx context.Context, node string) ([]netip.Addr, error)
}

// maxSyncHold bounds how long a request waits for the Node cache's first
// sync before it is returned to its sender with a retryable error.
const maxSyncHold = 5 * time.Second

// nodeCache is an informer on the cluster's Nodes (list and watch nodes: the
// gateway's ClusterRole already grants it for flow_correlation's index),
// keeping of each Node only what decides its addresses.
type nodeCache struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   listersv1.NodeLister
	stop     chan struct{}
}

func startNodeCache(c kubernetes.Interface) *nodeCache {
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTransform(k8sindex.StripNode))
	nodes := f.Core().V1().Nodes()
	nc := &nodeCache{factory: f, informer: nodes.Informer(), lister: nodes.Lister(), stop: make(chan struct{})}
	f.Start(nc.stop)
	return nc
}

func (nc *nodeCache) shutdown() {
	close(nc.stop)
	nc.factory.Shutdown()
}

// addresses returns node's addresses. Until the cache's first list has
// arrived it holds the request (at most maxSyncHold, or the request's
// deadline), then gives up with an error; a Node not in the cache (its watch
// event not yet seen: the TokenReview just said it exists) is an error too.
func (nc *nodeCache) addresses(ctx context.Context, node string) ([]netip.Addr, error) {
	if !nc.informer.HasSynced() {
		hold, cancel := context.WithTimeout(ctx, maxSyncHold)
		defer cancel()
		if !cache.WaitForCacheSync(hold.Done(), nc.informer.HasSynced) {
			return nil, fmt.Errorf("the gateway's Node cache has not synced (it lists and watches nodes), so Node %s's addresses are not known yet; send again later", node)
		}
	}
	n, err := nc.lister.Get(node)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the gateway's Node cache has no Node %s yet; send again later", node)
	}
	if err != nil {
		return nil, err
	}
	return k8sindex.NodeAddresses(n), nil
}
