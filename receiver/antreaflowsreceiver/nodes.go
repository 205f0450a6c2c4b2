package antreaflowsreceiver

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/flowtel/flowtel/internal/k8sclient"
	"github.com/flowtel/flowtel/internal/k8sindex"
)

// nodeAddrs is what the receiver knows of the cluster's Nodes: each Node's
// own addresses (decision D1: InternalIP, ExternalIP, and the gateway
// address of each podCIDR, its first host address) and UID. An Antrea agent
// does not tell its own Node's addresses from other sources: its gateway
// address (antrea-gw0, the source of the kubelet's probes and of every
// host-network process talking to a local Pod) is "a gateway", which it
// labels inter-Node (Antrea issue #8260), and its InternalIP is "external".
type nodeAddrs struct {
	mu    sync.RWMutex
	nodes map[string]nodeInfo
}

type nodeInfo struct {
	uid   string
	addrs []netip.Addr
}

// own returns the UID of the Node when addr is one of its addresses.
func (n *nodeAddrs) own(node string, addr netip.Addr) (uid string, ok bool) {
	if n == nil || node == "" {
		return "", false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	info, found := n.nodes[node]
	if !found || !slices.Contains(info.addrs, addr.Unmap()) {
		return "", false
	}
	return info.uid, true
}

func (n *nodeAddrs) set(in *corev1.Node) {
	// The Node's addresses as decision D1 defines them, from the one place
	// that does (its InternalIP/ExternalIP and each podCIDR's gateway address).
	info := nodeInfo{uid: string(in.UID), addrs: k8sindex.NodeAddresses(in)}
	n.mu.Lock()
	n.nodes[in.Name] = info
	n.mu.Unlock()
}

func (n *nodeAddrs) remove(name string) {
	n.mu.Lock()
	delete(n.nodes, name)
	n.mu.Unlock()
}

// nodeSyncTimeout bounds how long Start waits for the first list of Nodes;
// records that arrive before it are classified without them (as Antrea
// labelled them).
const nodeSyncTimeout = 30 * time.Second

// startNodes watches the cluster's Nodes (list and watch on nodes, which the
// gateway's ClusterRole grants for flow_correlation's index).
func (r *antreaReceiver) startNodes(ctx context.Context) error {
	if !r.cfg.Kubernetes.HasValue() {
		return nil
	}
	client := r.cfg.kubeClient
	if client == nil {
		k := r.cfg.Kubernetes.Get()
		c, err := k8sclient.New(k.AuthType, k.KubeConfig, "flowtel-antrea_flows")
		if err != nil {
			return fmt.Errorf("antrea_flows: kubernetes: %w", err)
		}
		client = c
	}
	r.nodes = &nodeAddrs{nodes: map[string]nodeInfo{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	// Keep what nodeAddrs reads: name, UID, podCIDRs, addresses.
	if err := inf.SetTransform(func(o any) (any, error) {
		in, ok := o.(*corev1.Node)
		if !ok {
			return o, nil
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.Name, UID: in.UID, ResourceVersion: in.ResourceVersion},
			Spec: corev1.NodeSpec{PodCIDR: in.Spec.PodCIDR, PodCIDRs: in.Spec.PodCIDRs}, Status: corev1.NodeStatus{Addresses: in.Status.Addresses}}, nil
	}); err != nil {
		return fmt.Errorf("antrea_flows: kubernetes: nodes informer: %w", err)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.nodes.set(o.(*corev1.Node)) },
		UpdateFunc: func(_, o any) { r.nodes.set(o.(*corev1.Node)) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if n, ok := o.(*corev1.Node); ok {
				r.nodes.remove(n.Name)
			}
		},
	}); err != nil {
		return fmt.Errorf("antrea_flows: kubernetes: nodes informer: %w", err)
	}
	r.informers = factory
	factory.Start(r.stop)
	wctx, cancel := context.WithTimeout(ctx, nodeSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), inf.HasSynced) {
		r.set.Logger.Warn("antrea_flows: the Nodes are not listed yet; until they are, a host's traffic to its own Pods is classified as the agent labelled it (Antrea issue #8260)",
			zap.Duration("waited", nodeSyncTimeout))
	}
	return nil
}
