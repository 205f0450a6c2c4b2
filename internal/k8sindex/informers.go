package k8sindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
	policyinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"

	"github.com/flowtel/flowtel/internal/tick"
)

// Resource names one watched API resource, for errors and RBAC docs.
type Resource struct{ Group, Resource string }

func (r Resource) String() string {
	if r.Group == "" {
		return r.Resource
	}
	return r.Resource + "." + r.Group
}

// Watched lists every resource the Index lists and watches: the ClusterRole
// it needs grants get, list and watch on each.
var Watched = []Resource{
	{"", "pods"}, {"", "nodes"}, {"", "services"},
	{"discovery.k8s.io", "endpointslices"},
	{"apps", "replicasets"}, {"batch", "jobs"},
}

// purgeInterval is how often ended Pods past their retention are dropped
// when no Pod event does it first.
const purgeInterval = 30 * time.Second

// Informers feed an Index from the API server.
type Informers struct {
	ix     *Index
	client kubernetes.Interface
	logger *zap.Logger

	podFactory, factory informers.SharedInformerFactory
	synced              map[Resource]cache.InformerSynced
	// watched is Watched, and PolicyWatched (and the served
	// AdminPolicyWatched) with Options.NetworkPolicies.
	watched []Resource
	// policyClient and policyFactory: the network-policy-api's, when served.
	policyClient  policyclient.Interface
	policyFactory policyinformers.SharedInformerFactory

	errMu   sync.Mutex
	lastErr map[Resource]error

	cancel context.CancelFunc
	done   chan struct{}
}

// wiring is one informer and what its events do to the Index.
type wiring struct {
	res       Resource
	informer  cache.SharedIndexInformer
	transform cache.TransformFunc
	upsert    func(any)
	remove    func(any)
}

// stripper makes an informer transform of keep, which copies out of an
// object what the Index reads; anything else the informer hands over (a
// DeletedFinalStateUnknown tombstone) passes as it is.
func stripper[T any](keep func(*T) *T) cache.TransformFunc {
	return func(obj any) (any, error) {
		in, ok := obj.(*T)
		if !ok {
			return obj, nil
		}
		return keep(in), nil
	}
}

// NewInformers wires client-go shared informers (with stripping transforms)
// to ix. Nothing talks to the API server before Start but, with
// Options.NetworkPolicies, the discovery of the AdminNetworkPolicy API.
func NewInformers(ix *Index, client kubernetes.Interface, logger *zap.Logger) (*Informers, error) {
	in := &Informers{ix: ix, client: client, logger: logger, lastErr: map[Resource]error{}, synced: map[Resource]cache.InformerSynced{}}
	in.factory = informers.NewSharedInformerFactoryWithOptions(client, 0)
	in.podFactory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(in.podListOptions))

	wirings := []wiring{
		{Watched[0], in.podFactory.Core().V1().Pods().Informer(), stripPod(ix.opts.PodLabels || ix.opts.NetworkPolicies, ix.opts.NetworkPolicies),
			func(o any) { ix.upsertPod(asPodObject(o)) },
			func(o any) { ix.deletePod(asPodObject(o)) }},
		{Watched[1], in.factory.Core().V1().Nodes().Informer(), StripNode,
			func(o any) { ix.upsertNode(o.(*corev1.Node)) },
			func(o any) { ix.deleteNode(o.(*corev1.Node).Name) }},
		{Watched[2], in.factory.Core().V1().Services().Informer(), stripper(keepService),
			func(o any) { ix.upsertService(o.(*corev1.Service)) },
			func(o any) { ix.deleteService(string(o.(*corev1.Service).UID)) }},
		{Watched[3], in.factory.Discovery().V1().EndpointSlices().Informer(), stripper(keepEndpointSlice),
			func(o any) { ix.upsertEndpointSlice(o.(*discoveryv1.EndpointSlice)) },
			func(o any) { s := o.(*discoveryv1.EndpointSlice); ix.deleteEndpointSlice(s.Namespace, s.Name) }},
		{Watched[4], in.factory.Apps().V1().ReplicaSets().Informer(),
			stripOwned(func(m metav1.ObjectMeta) any { return &appsv1.ReplicaSet{ObjectMeta: m} }),
			func(o any) { ix.upsertOwned("ReplicaSet", o.(*appsv1.ReplicaSet)) },
			func(o any) { r := o.(*appsv1.ReplicaSet); ix.deleteOwned("ReplicaSet", r.Namespace, r.Name) }},
		{Watched[5], in.factory.Batch().V1().Jobs().Informer(),
			stripOwned(func(m metav1.ObjectMeta) any { return &batchv1.Job{ObjectMeta: m} }),
			func(o any) { ix.upsertOwned("Job", o.(*batchv1.Job)) },
			func(o any) { j := o.(*batchv1.Job); ix.deleteOwned("Job", j.Namespace, j.Name) }},
	}
	in.watched = Watched
	if ix.opts.NetworkPolicies {
		in.watched = append(slices.Clone(Watched), PolicyWatched...)
		wirings = append(wirings, in.policyWirings()...)
	}
	for _, w := range wirings {
		if err := w.informer.SetTransform(w.transform); err != nil {
			return nil, fmt.Errorf("%s: cannot set the informer transform (got %w)", w.res, err)
		}
		res := w.res
		if err := w.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			in.watchError(res, err)
		}); err != nil {
			return nil, fmt.Errorf("%s: cannot set the watch error handler (got %w)", res, err)
		}
		upsert, remove := w.upsert, w.remove
		_, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { upsert(o) },
			UpdateFunc: func(_, o any) { upsert(o) },
			DeleteFunc: func(o any) {
				if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				remove(o)
			},
		})
		if err != nil {
			return nil, fmt.Errorf("%s: cannot add the event handler (got %w)", res, err)
		}
		if prev, cur := in.synced[res], w.informer.HasSynced; prev != nil {
			in.synced[res] = func() bool { return prev() && cur() } // a second informer of res (peer Pods)
		} else {
			in.synced[res] = cur
		}
	}
	return in, nil
}

// asPodObject accepts the transformed object, or a Pod (a tombstone's last
// state may not have been through the transform).
func asPodObject(o any) *podObject {
	if p, ok := o.(*corev1.Pod); ok {
		po, _ := stripPod(true, true)(p)
		return po.(*podObject)
	}
	return o.(*podObject)
}

func (in *Informers) podListOptions(o *metav1.ListOptions) {
	if !in.ix.opts.AllPods {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", in.ix.opts.NodeName).String()
	}
}

// watchError records and logs a failed list or watch: client-go retries with
// back-off by itself, so this is where an RBAC or connectivity problem shows.
func (in *Informers) watchError(res Resource, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	in.errMu.Lock()
	in.lastErr[res] = err
	in.errMu.Unlock()
	in.logger.Warn("Kubernetes list/watch failed; retrying", zap.Stringer("resource", res), zap.Error(describe(res, "list/watch", err)))
}

// Preflight lists each resource once (one object), with the Pod field
// selector, so that an unreachable API server or a missing RBAC grant fails
// with an error naming the resource and the verb, instead of informers
// retrying forever.
func (in *Informers) Preflight(ctx context.Context) error {
	var errs []error
	for _, res := range in.watched {
		opts := metav1.ListOptions{Limit: 1}
		var err error
		switch res.Resource {
		case "pods":
			in.podListOptions(&opts)
			_, err = in.client.CoreV1().Pods("").List(ctx, opts)
		case "nodes":
			_, err = in.client.CoreV1().Nodes().List(ctx, opts)
		case "services":
			_, err = in.client.CoreV1().Services("").List(ctx, opts)
		case "endpointslices":
			_, err = in.client.DiscoveryV1().EndpointSlices("").List(ctx, opts)
		case "replicasets":
			_, err = in.client.AppsV1().ReplicaSets("").List(ctx, opts)
		case "jobs":
			_, err = in.client.BatchV1().Jobs("").List(ctx, opts)
		case "networkpolicies":
			_, err = in.client.NetworkingV1().NetworkPolicies("").List(ctx, opts)
		case "namespaces":
			_, err = in.client.CoreV1().Namespaces().List(ctx, opts)
		case "adminnetworkpolicies", "baselineadminnetworkpolicies":
			err = in.listAdminPolicy(ctx, res, opts)
		}
		if err != nil {
			err = describe(res, "list", err)
			if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
				return err // unreachable: every other resource would say the same
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// describe phrases an API error with the resource and verb it concerns.
func describe(res Resource, verb string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		grant := "get, list, watch"
		if verb == "get" {
			grant = "get"
		}
		return fmt.Errorf("%s %s: forbidden by RBAC (got %w); grant %s on it in the ClusterRole", verb, res, err, grant)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s %s: the API server rejected the credentials (got %w); check the ServiceAccount token or the kubeconfig", verb, res, err)
	default:
		return fmt.Errorf("%s %s: the API server did not answer (got %w); check that it is reachable from the collector", verb, res, err)
	}
}

// Start runs the informers (and the purge of ended Pods) until Shutdown.
func (in *Informers) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	in.done = make(chan struct{})
	in.factory.Start(ctx.Done())
	in.podFactory.Start(ctx.Done())
	if in.policyFactory != nil {
		in.policyFactory.Start(ctx.Done())
	}
	go func() {
		defer close(in.done)
		tick.Every(ctx, purgeInterval, func(time.Time) {
			in.ix.Purge()
			if in.ix.peers != nil {
				in.ix.peers.Purge()
			}
		})
	}()
}

// WaitForSync waits until every informer has listed its resource once. On
// timeout the error names the resources not synced and their last list/watch error.
func (in *Informers) WaitForSync(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var pending []string
		for _, res := range in.watched {
			if !in.synced[res]() {
				pending = append(pending, res.String())
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			sort.Strings(pending)
			msg := fmt.Sprintf("Kubernetes caches not synced after %s: %s", timeout, strings.Join(pending, ", "))
			in.errMu.Lock()
			var errs []error
			for _, res := range in.watched {
				if err := in.lastErr[res]; err != nil {
					errs = append(errs, describe(res, "list/watch", err))
				}
			}
			in.errMu.Unlock()
			if len(errs) > 0 {
				return fmt.Errorf("%s: %w", msg, errors.Join(errs...))
			}
			return errors.New(msg)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// HasSynced reports whether every informer has listed its resource once.
func (in *Informers) HasSynced() bool {
	for _, synced := range in.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// Shutdown stops the informers and waits for their goroutines.
func (in *Informers) Shutdown() {
	if in.cancel == nil {
		return
	}
	in.cancel()
	in.factory.Shutdown()
	in.podFactory.Shutdown()
	if in.policyFactory != nil {
		in.policyFactory.Shutdown()
	}
	<-in.done
	in.cancel = nil
	// Watches are closed; their connections would idle (with their
	// goroutines) in client-go's shared transport until the process exits.
	if rc, ok := in.client.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil && rc.Client != nil {
		utilnet.CloseIdleConnectionsFor(rc.Client.Transport)
	}
}

// Run wires informers to ix and starts them. With wait it first lists each
// resource once (Preflight) and then waits for the caches, bounded by
// timeout each, so that a missing grant or an unreachable API server fails
// here with an error naming the resource and verb.
func Run(ctx context.Context, ix *Index, client kubernetes.Interface, logger *zap.Logger, wait bool, timeout time.Duration) (*Informers, error) {
	inf, err := NewInformers(ix, client, logger)
	if err != nil {
		return nil, err
	}
	if wait {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := inf.Preflight(pctx)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	inf.Start()
	if wait {
		if err := inf.WaitForSync(ctx, timeout); err != nil {
			inf.Shutdown()
			return nil, err
		}
	}
	return inf, nil
}
