// Package k8sindex keeps the Kubernetes state flowtel needs to name the two
// endpoints of a connection (decisions D1, D7): Pods by IP and time, Nodes by
// address and podCIDR, Services by their front-end addresses, and the owners
// that name a Pod's workload. It is fed by client-go shared informers whose
// transforms strip every field that is not used, and is read under a
// read-lock on the hot path without allocating.
//
// The node collector's k8s_flow processor uses it with this Node's Pods only;
// a gateway can use it with all Pods.
package k8sindex

import (
	"net/netip"
	"sync"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/netpol"
)

// DefaultDeletedPodRetention is how long a deleted or terminated Pod still
// names connections that started while it ran (decision D7, as Antrea).
const DefaultDeletedPodRetention = 5 * time.Minute

// Options configure an Index.
type Options struct {
	// NodeName restricts the Pod informer to this Node's Pods (spec.nodeName)
	// unless AllPods is set.
	NodeName string
	AllPods  bool
	// PodLabels keeps Pod labels in the cache and hands them out.
	PodLabels bool
	// NetworkPolicies watches NetworkPolicies and Namespaces (PolicyWatched)
	// and keeps Pod labels and named container ports, with their history,
	// for View.PolicyVerdicts.
	NetworkPolicies bool
	// DeletedPodRetention defaults to DefaultDeletedPodRetention.
	DeletedPodRetention time.Duration
	// Now is the clock (tests); defaults to time.Now.
	Now func() time.Time
}

// Index is the in-memory Kubernetes state. Lookups take the read lock; the
// informer handlers take the write lock.
type Index struct {
	opts Options
	mu   sync.RWMutex

	pods     map[string]*pod              // by UID
	podsByIP map[netip.Addr][]*pod        // owners of an IP over time, oldest first
	ended    []*pod                       // deleted or terminated Pods awaiting purge
	nodes    map[string]*node             // by name
	nodeAddr map[netip.Addr]*node         // InternalIP, ExternalIP and podCIDR gateway addresses
	podCIDR  map[netip.Prefix]*node       // podCIDRs (masked)
	cidrBits [2][]int                     // distinct podCIDR prefix lengths: [0] IPv4, [1] IPv6
	services map[string]*service          // by UID
	fronts   map[frontKey]*ServicePort    // ClusterIP, LoadBalancer ingress, externalIP
	nodePort map[nodePortKey]*ServicePort // NodePort on any Node address
	slices   map[string]*endpointSlice    // by namespace/name
	// sliceOwners: Pods EndpointSlices listed for an address, oldest first (remote Pods)
	sliceOwners      map[netip.Addr][]*sliceOwner
	endedSliceOwners []*sliceOwner          // no longer listed, awaiting purge
	owners           map[objectRef]ownerRef // ReplicaSet/Job -> its controller (Deployment/CronJob)
	pol              policyState            // NetworkPolicies and Namespace labels over time
	// peers holds every Pod of the cluster, for the peers of policy rules,
	// when this Index watches only its Node's Pods (NetworkPolicies without
	// AllPods); only its Pod store is used.
	peers *Index
}

// New returns an empty Index; Informers feed it.
func New(opts Options) *Index {
	if opts.DeletedPodRetention <= 0 {
		opts.DeletedPodRetention = DefaultDeletedPodRetention
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ix := &Index{
		opts:        opts,
		pods:        make(map[string]*pod),
		podsByIP:    make(map[netip.Addr][]*pod),
		nodes:       make(map[string]*node),
		nodeAddr:    make(map[netip.Addr]*node),
		podCIDR:     make(map[netip.Prefix]*node),
		services:    make(map[string]*service),
		fronts:      make(map[frontKey]*ServicePort),
		nodePort:    make(map[nodePortKey]*ServicePort),
		slices:      make(map[string]*endpointSlice),
		sliceOwners: make(map[netip.Addr][]*sliceOwner),
		owners:      make(map[objectRef]ownerRef),
		pol: policyState{
			policies:   make(map[string]map[string]*history[policyVersion]),
			sorted:     make(map[string][]*history[policyVersion]),
			current:    make(map[string][]*netpol.Policy),
			changed:    make(map[string]time.Time),
			namespaces: make(map[string]*history[map[string]string]),
		},
	}
	if opts.NetworkPolicies && !opts.AllPods {
		peerOpts := opts
		peerOpts.AllPods, peerOpts.PodLabels = true, false
		ix.peers = New(peerOpts)
	}
	return ix
}

// unindex deletes from m the keys a removed object was indexed under, those
// whose value is still the object's (mine): another object may have taken
// a key over since.
func unindex[K comparable, V any](m map[K]V, keys []K, mine func(V) bool) {
	for _, k := range keys {
		if mine(m[k]) {
			delete(m, k)
		}
	}
}

// Options returns the options the Index was created with (defaults filled in).
func (ix *Index) Options() Options { return ix.opts }

// Resolution says how an endpoint address was resolved.
type Resolution uint8

const (
	// ResolvedPod: a Pod owned the address at the connection's start.
	ResolvedPod Resolution = iota + 1
	// ResolvedNode: a Node's InternalIP/ExternalIP or podCIDR gateway address.
	ResolvedNode
	// ResolvedPodSubnet: inside a Node's podCIDR but no known Pod owned it
	// (a remote Pod when only local Pods are watched, or a Pod not yet seen):
	// a pod endpoint on that Node, without a name.
	ResolvedPodSubnet
	// ResolvedExternal: nothing in the cluster owns the address.
	ResolvedExternal
)

// View is a read-locked view of the Index for a batch of lookups.
// Release it with Done; it must not be kept.
type View struct{ ix *Index }

// Read locks the Index for reading.
func (ix *Index) Read() View {
	ix.mu.RLock()
	return View{ix}
}

// Done releases the read lock.
func (v View) Done() { v.ix.mu.RUnlock() }

// ResolveEndpoint fills ep's Kubernetes identity from its Address, as owned at
// start (zero start: now). Everything but Address and Port is overwritten.
// Strings and the label map are shared with the cache: callers must not modify them.
func (v View) ResolveEndpoint(ep *flowrecord.Endpoint, start time.Time) Resolution {
	addr, port := ep.Address.Unmap(), ep.Port
	*ep = flowrecord.Endpoint{Address: ep.Address, Port: port}
	ix := v.ix
	if p := ix.podAt(addr, start); p != nil {
		ep.Kind = flowrecord.EndpointPod
		ep.Namespace, ep.PodName, ep.PodUID = p.namespace, p.name, p.uid
		if ix.opts.PodLabels {
			ep.PodLabels = p.labels
		}
		ep.WorkloadKind, ep.WorkloadName = ix.workload(p)
		ep.NodeName = p.nodeName
		if n := ix.nodes[p.nodeName]; n != nil {
			ep.NodeUID = n.uid
		}
		return ResolvedPod
	}
	if n := ix.nodeAddr[addr]; n != nil {
		ep.Kind = flowrecord.EndpointNode
		ep.NodeName, ep.NodeUID = n.name, n.uid
		return ResolvedNode
	}
	if n := ix.nodeOfPodSubnet(addr); n != nil {
		ep.Kind = flowrecord.EndpointPod
		ep.NodeName, ep.NodeUID = n.name, n.uid
		// A Pod this Index does not watch (another Node's, with local Pods
		// only): EndpointSlices name it when it backs a Service. Watched
		// Nodes' Pods are not: there the time-aware Pod index has the say.
		if se := ix.sliceOwnerAt(addr, start); se != nil && se.nodeName == n.name && !ix.opts.AllPods && n.name != ix.opts.NodeName {
			ep.Namespace, ep.PodName, ep.PodUID = se.namespace, se.podName, se.podUID
		}
		return ResolvedPodSubnet
	}
	ep.Kind = flowrecord.EndpointExternal
	return ResolvedExternal
}

// Service returns the Service port a pre-DNAT destination addressed: a
// ClusterIP, LoadBalancer ingress IP or externalIP with its port, or a
// NodePort on any Node address. nil when none matches.
func (v View) Service(addr netip.Addr, port uint16, protocol uint8) *ServicePort {
	addr = addr.Unmap()
	ix := v.ix
	if sp := ix.fronts[frontKey{addr, port, protocol}]; sp != nil {
		return sp
	}
	if ix.nodeAddr[addr] != nil {
		return ix.nodePort[nodePortKey{port, protocol}]
	}
	return nil
}

// Sizes counts the objects in the cache, for telemetry.
type Sizes struct {
	Pods, PodIPs, Nodes, Services, EndpointSlices, Owners int
}

// Sizes returns the current cache sizes.
func (ix *Index) Sizes() Sizes {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return Sizes{
		Pods: len(ix.pods), PodIPs: len(ix.podsByIP), Nodes: len(ix.nodes),
		Services: len(ix.services), EndpointSlices: len(ix.slices), Owners: len(ix.owners),
	}
}
