package flowcorrelationprocessor

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/k8sindex"
)

// clientFunc makes the Kubernetes client of the gateway's index; tests
// substitute a fake clientset.
type clientFunc func(*KubernetesConfig) (kubernetes.Interface, error)

func newClient(cfg *KubernetesConfig) (kubernetes.Interface, error) {
	return cfg.Client("flowtel-flow_correlation")
}

// identity resolves, at the gateway, what a record lacks from the gateway's
// own Kubernetes index, as Antrea's Flow Aggregator fills records from its
// Pod store: a Pod endpoint a Node could not name (an unpaired half's peer,
// either side of a proxied record) is named after the Pod that owned the
// address when the connection started (decision D7), and a record without a
// cluster UID gets the cluster's. What the Nodes said is never overwritten.
type identity struct {
	cfg       *KubernetesConfig
	logger    *zap.Logger
	client    clientFunc
	ix        *k8sindex.Index
	informers *k8sindex.Informers
	cluster   k8sindex.ClusterName
}

func newIdentity(cfg *KubernetesConfig, logger *zap.Logger, client clientFunc, now func() time.Time) *identity {
	return &identity{cfg: cfg, logger: logger, client: client, ix: k8sindex.New(k8sindex.Options{
		AllPods: true, PodLabels: cfg.PodLabels, DeletedPodRetention: cfg.DeletedPodRetention, Now: now,
	})}
}

// start runs the informers and reads the cluster UID; with wait_for_sync it
// returns once the caches are filled, or fails naming the resource and verb.
func (id *identity) start(ctx context.Context) error {
	client, err := id.client(id.cfg)
	if err != nil {
		return fmt.Errorf("kubernetes: no API client (%w); check auth_type and kubeconfig", err)
	}
	inf, err := k8sindex.Run(ctx, id.ix, client, id.logger, id.cfg.WaitForSync, id.cfg.WaitForSyncTimeout)
	if err != nil {
		return fmt.Errorf("kubernetes: the index did not sync (%w); grant the access named, or raise wait_for_sync_timeout", err)
	}
	id.informers = inf
	if err := id.cluster.Start(ctx, "", id.cfg.WaitForSync, id.cfg.WaitForSyncTimeout, client, id.logger); err != nil {
		return fmt.Errorf("kubernetes: no cluster UID (%w); grant get on the kube-system Namespace", err)
	}
	return nil
}

func (id *identity) shutdown() {
	id.cluster.Stop()
	if id.informers != nil {
		id.informers.Shutdown()
		id.informers = nil
	}
}

// fill completes r's endpoints and cluster UID from the index.
func (id *identity) fill(r *flowrecord.Record) {
	if lacksPod(&r.Source) || lacksPod(&r.Destination) {
		v := id.ix.Read()
		fillPod(v, &r.Source, r.Start)
		fillPod(v, &r.Destination, r.Start)
		v.Done()
	}
	if r.ClusterUID == "" {
		r.ClusterUID = id.cluster.UID()
	}
}

// nameResource sets the cluster UID on a proxied batch's resource that has none.
func (id *identity) nameResource(rl plog.ResourceLogs) {
	attrs := rl.Resource().Attributes()
	if _, ok := attrs.Get(catalogue.ResourceClusterUID); !ok {
		if uid := id.cluster.UID(); uid != "" {
			attrs.PutStr(catalogue.ResourceClusterUID, uid)
		}
	}
}

// lacksPod: the endpoint is a Pod no Node named, or was not classified at all.
func lacksPod(ep *flowrecord.Endpoint) bool {
	return ep.PodName == "" && (ep.Kind == flowrecord.EndpointPod || ep.Kind == 0)
}

// fillPod names ep after the Pod that owned its address at start, when it
// lacks one and the index knows one on the Node the record says (if it says).
func fillPod(v k8sindex.View, ep *flowrecord.Endpoint, start time.Time) {
	if !lacksPod(ep) {
		return
	}
	got := flowrecord.Endpoint{Address: ep.Address, Port: ep.Port}
	if v.ResolveEndpoint(&got, start) != k8sindex.ResolvedPod || ep.NodeName != "" && ep.NodeName != got.NodeName {
		return
	}
	got.Address = ep.Address
	*ep = got
}
