package k8sindex

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/netpol"
)

// PolicyWatched lists what the Index watches in addition to Watched with
// Options.NetworkPolicies: the ClusterRole grants get, list and watch on each.
var PolicyWatched = []Resource{{"networking.k8s.io", "networkpolicies"}, {"", "namespaces"}}

// AdminPolicyWatched lists what the Index watches in addition with
// Options.NetworkPolicies when the API server serves it (discovery of
// policy.networking.k8s.io/v1alpha1, the network-policy-api CRDs): the
// ClusterRole grants get, list and watch on each; a cluster without them
// is not asked.
var AdminPolicyWatched = []Resource{
	{"policy.networking.k8s.io", "adminnetworkpolicies"}, {"policy.networking.k8s.io", "baselineadminnetworkpolicies"},
}

// The policy state keeps cluster-scoped policies under these keys in place
// of a Namespace (no Namespace name has a space).
const (
	adminKey    = " admin"
	baselineKey = " baseline"
)

// maxVersions bounds the versions kept of one object (a policy, a
// Namespace's or a Pod's labels): with DeletedPodRetention, the history's
// bound. A connection older than the oldest kept version is evaluated
// against that version.
const maxVersions = 8

// version is one state of an object, valid from from until to (zero: still).
type version[T any] struct {
	from, to time.Time
	v        T
}

// history is an object's bounded list of versions, oldest first.
type history[T any] struct{ versions []version[T] }

// set makes v the current version from at.
func (h *history[T]) set(v T, at time.Time) {
	if n := len(h.versions); n > 0 && h.versions[n-1].to.IsZero() {
		h.versions[n-1].to = at
	}
	if len(h.versions) == maxVersions {
		h.versions = slices.Delete(h.versions, 0, 1)
	}
	h.versions = append(h.versions, version[T]{from: at, v: v})
}

// end closes the current version at at.
func (h *history[T]) end(at time.Time) {
	if n := len(h.versions); n > 0 && h.versions[n-1].to.IsZero() {
		h.versions[n-1].to = at
	}
}

// at returns the version valid at t; the oldest one for a t before it when
// first is set (an object seen first at the informer's start had that state
// before, as far as anyone knows).
func (h *history[T]) at(t time.Time, first bool) (T, bool) {
	for i := len(h.versions) - 1; i >= 0; i-- {
		v := &h.versions[i]
		if !t.Before(v.from) || (first && i == 0) {
			if v.to.IsZero() || t.Before(v.to) {
				return v.v, true
			}
			break
		}
	}
	var zero T
	return zero, false
}

// purge drops versions that ended before cutoff; true when none is left.
func (h *history[T]) purge(cutoff time.Time) bool {
	i := 0
	for i < len(h.versions) && !h.versions[i].to.IsZero() && h.versions[i].to.Before(cutoff) {
		i++
	}
	h.versions = slices.Delete(h.versions, 0, i)
	return len(h.versions) == 0
}

// policyVersion is one version of a NetworkPolicy, with the generation it
// was converted from (an update that leaves it makes no new version).
type policyVersion struct {
	p          *netpol.Policy
	generation int64
}

// policyState is the NetworkPolicies and Namespace labels over time.
type policyState struct {
	// policies by Namespace, then UID.
	policies map[string]map[string]*history[policyVersion]
	// sorted lists each Namespace's policies by name, current the ones in
	// force since changed, the last start or end of a version (rebuilt on
	// every change).
	sorted  map[string][]*history[policyVersion]
	current map[string][]*netpol.Policy
	changed map[string]time.Time
	// namespaces' labels by name.
	namespaces map[string]*history[map[string]string]
}

func (ix *Index) upsertPolicy(np *networkingv1.NetworkPolicy) {
	ix.upsertPolicyAt(np.Namespace, &np.ObjectMeta, netpol.FromAPI(np))
}

// upsertPolicyAt records p (converted from the object with meta) under key:
// its Namespace, or adminKey / baselineKey.
func (ix *Index) upsertPolicyAt(key string, meta metav1.Object, p *netpol.Policy) {
	now := ix.opts.Now()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.purgePoliciesLocked(now)
	byUID := ix.pol.policies[key]
	if byUID == nil {
		byUID = map[string]*history[policyVersion]{}
		ix.pol.policies[key] = byUID
	}
	h := byUID[p.UID]
	at := now
	if h != nil && meta.GetGeneration() != 0 {
		if cur, ok := h.at(now, false); ok && cur.generation == meta.GetGeneration() {
			return // metadata changed, not the spec
		}
	}
	if h == nil {
		h = &history[policyVersion]{}
		byUID[p.UID] = h
		// A policy applies from its creation (not from when this
		// collector saw it, which may be its start).
		if c := meta.GetCreationTimestamp().Time; !c.IsZero() && c.Before(now) {
			at = c
		}
	}
	h.set(policyVersion{p, meta.GetGeneration()}, at)
	ix.sortPoliciesLocked(key)
}

// sortPoliciesLocked rebuilds the order of a Namespace's policies: by
// name, AdminNetworkPolicies by priority first.
func (ix *Index) sortPoliciesLocked(namespace string) {
	byUID := ix.pol.policies[namespace]
	if len(byUID) == 0 {
		delete(ix.pol.sorted, namespace)
		delete(ix.pol.current, namespace)
		delete(ix.pol.changed, namespace)
		return
	}
	list := make([]*history[policyVersion], 0, len(byUID))
	for _, h := range byUID {
		list = append(list, h)
	}
	slices.SortFunc(list, func(a, b *history[policyVersion]) int {
		pa, pb := a.versions[len(a.versions)-1].v.p, b.versions[len(b.versions)-1].v.p
		return cmp.Or(cmp.Compare(pa.Priority, pb.Priority), strings.Compare(pa.Name, pb.Name), strings.Compare(pa.UID, pb.UID))
	})
	ix.pol.sorted[namespace] = list
	var (
		current []*netpol.Policy
		changed time.Time
	)
	for _, h := range list {
		last := &h.versions[len(h.versions)-1]
		if last.to.IsZero() {
			current = append(current, last.v.p)
			changed = later(changed, last.from)
		} else {
			changed = later(changed, last.to)
		}
	}
	ix.pol.current[namespace], ix.pol.changed[namespace] = current, changed
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (ix *Index) deletePolicy(namespace, uid string) {
	now := ix.opts.Now()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if h := ix.pol.policies[namespace][uid]; h != nil {
		h.end(now)
		ix.sortPoliciesLocked(namespace)
	}
	ix.purgePoliciesLocked(now)
}

func (ix *Index) upsertNamespace(ns *corev1.Namespace) {
	now := ix.opts.Now()
	l := ns.Labels
	if l == nil {
		l = map[string]string{}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.purgePoliciesLocked(now)
	h := ix.pol.namespaces[ns.Name]
	if h == nil {
		h = &history[map[string]string]{}
		ix.pol.namespaces[ns.Name] = h
	} else if cur, ok := h.at(now, false); ok && maps.Equal(cur, l) {
		return
	}
	h.set(l, now)
}

func (ix *Index) deleteNamespace(name string) {
	now := ix.opts.Now()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if h := ix.pol.namespaces[name]; h != nil {
		h.end(now)
	}
	ix.purgePoliciesLocked(now)
}

// purgePoliciesLocked drops versions that ended DeletedPodRetention ago.
func (ix *Index) purgePoliciesLocked(now time.Time) {
	cutoff := now.Add(-ix.opts.DeletedPodRetention)
	for ns, byUID := range ix.pol.policies {
		purged := false
		for uid, h := range byUID {
			if h.purge(cutoff) {
				delete(byUID, uid)
				purged = true
			}
		}
		if len(byUID) == 0 {
			delete(ix.pol.policies, ns)
		}
		if purged {
			ix.sortPoliciesLocked(ns)
		}
	}
	for name, h := range ix.pol.namespaces {
		if h.purge(cutoff) {
			delete(ix.pol.namespaces, name)
		}
	}
}

// cluster is netpol's view of a read-locked Index.
type cluster View

// Policies returns the policies of namespace in force at t, sorted by name:
// the current set, shared, for a t after the Namespace's last policy change,
// else a list built for t.
func (c cluster) Policies(namespace string, t time.Time) []*netpol.Policy {
	if !t.Before(c.ix.pol.changed[namespace]) {
		return c.ix.pol.current[namespace]
	}
	var out []*netpol.Policy
	for _, h := range c.ix.pol.sorted[namespace] {
		if pv, ok := h.at(t, false); ok {
			out = append(out, pv.p)
		}
	}
	return out
}

// AdminPolicies returns the AdminNetworkPolicies in force at t, by priority.
func (c cluster) AdminPolicies(t time.Time) []*netpol.Policy { return c.Policies(adminKey, t) }

// BaselinePolicies returns the BaselineAdminNetworkPolicies in force at t.
func (c cluster) BaselinePolicies(t time.Time) []*netpol.Policy { return c.Policies(baselineKey, t) }

// NamespaceLabels returns a Namespace's labels at t.
func (c cluster) NamespaceLabels(namespace string, t time.Time) (map[string]string, bool) {
	h := c.ix.pol.namespaces[namespace]
	if h == nil {
		return nil, false
	}
	return h.at(t, true)
}

// PolicyVerdict evaluates the NetworkPolicies for r (its endpoints'
// addresses, protocol, destination port and start) as they stood at its
// start: with ingress, the verdict of the destination Pod's policies, else
// that of the source Pod's. Endpoints are resolved again from their
// addresses, with labels and container ports as of the start; an ingress
// peer SNATed on the way (r.ProxySNATAddress) is seen by its SNAT address,
// as the destination's datapath sees it. Without Options.NetworkPolicies
// every side is Unisolated.
func (v View) PolicyVerdict(r *flowrecord.Record, ingress bool) netpol.Verdict {
	if !v.ix.opts.NetworkPolicies {
		return netpol.Verdict{}
	}
	subject := &r.Destination
	if !ingress {
		subject = &r.Source
	}
	if subject.Namespace != "" && len(v.ix.pol.sorted[subject.Namespace]) == 0 &&
		len(v.ix.pol.sorted[adminKey]) == 0 && len(v.ix.pol.sorted[baselineKey]) == 0 {
		return netpol.Verdict{} // resolved already, and no policy that could select it was here
	}
	start := r.Start
	if start.IsZero() {
		start = v.ix.opts.Now()
	}
	conn := netpol.Connection{Protocol: r.Protocol, Port: r.Destination.Port, Start: start}
	src, srcNamespace := r.Source.Address, r.Source.Namespace
	if a := r.ProxySNATAddress; ingress && a.IsValid() && !a.IsUnspecified() {
		src, srcNamespace = a, ""
	}
	v.policyEndpoint(&conn.Source, src, srcNamespace, start)
	v.policyEndpoint(&conn.Destination, r.Destination.Address, r.Destination.Namespace, start)
	return netpol.Evaluate(cluster(v), &conn, ingress)
}

// policyEndpoint describes the endpoint at addr at start; namespace is what
// the record already says (an EndpointSlice's name of a Pod not watched).
func (v View) policyEndpoint(ep *netpol.Endpoint, addr netip.Addr, namespace string, start time.Time) {
	ix := v.ix
	a := addr.Unmap()
	ep.Address = a
	if p := ix.podAt(a, start); p != nil {
		p.describe(ep, start)
		return
	}
	if ix.peers != nil && ix.peers.describePeer(ep, a, start) {
		return
	}
	if ix.nodeAddr[a] != nil {
		ep.Kind = flowrecord.EndpointNode
		return
	}
	if ix.nodeOfPodSubnet(a) != nil {
		ep.Kind, ep.Namespace = flowrecord.EndpointPod, namespace
		return
	}
	ep.Kind = flowrecord.EndpointExternal
}

// describe fills ep with what policies match p on at start. The label map
// and ports are shared with the Index (an update replaces them, never
// changes them in place).
func (p *pod) describe(ep *netpol.Endpoint, start time.Time) {
	ep.Kind, ep.Namespace = flowrecord.EndpointPod, p.namespace
	ep.Labels = p.labelsAt(start)
	ep.Ports, ep.PortsKnown = p.ports, true
}

// describePeer is describe of the Pod that owned a at start, read under the
// peer Index's own read lock: its writer, the cluster-wide Pod informer,
// takes only that lock and updates a Pod in place, so the Pod is read while
// the lock is held and not after (the caller holds only the main Index's).
// It reports whether a Pod owned a.
func (ix *Index) describePeer(ep *netpol.Endpoint, a netip.Addr, start time.Time) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	p := ix.podAt(a, start)
	if p == nil {
		return false
	}
	p.describe(ep, start)
	return true
}

// policyWirings are the informers of PolicyWatched (and of the served
// AdminPolicyWatched), and with only this Node's Pods in the Index, a
// cluster-wide Pod informer for rule peers.
func (in *Informers) policyWirings() []wiring {
	ix := in.ix
	var peers []wiring
	if pe := ix.peers; pe != nil {
		peers = append(peers, wiring{Watched[0], in.factory.Core().V1().Pods().Informer(), stripPod(true, true),
			func(o any) { pe.upsertPod(asPodObject(o)) },
			func(o any) { pe.deletePod(asPodObject(o)) }})
	}
	return append(append(peers, in.adminPolicyWirings()...), []wiring{
		{PolicyWatched[0], in.factory.Networking().V1().NetworkPolicies().Informer(), stripMeta,
			func(o any) { ix.upsertPolicy(o.(*networkingv1.NetworkPolicy)) },
			func(o any) { n := o.(*networkingv1.NetworkPolicy); ix.deletePolicy(n.Namespace, string(n.UID)) }},
		{PolicyWatched[1], in.factory.Core().V1().Namespaces().Informer(), stripper(keepNamespace),
			func(o any) { ix.upsertNamespace(o.(*corev1.Namespace)) },
			func(o any) { ix.deleteNamespace(o.(*corev1.Namespace).Name) }},
	}...)
}

// stripMeta drops managed fields and annotations (a NetworkPolicy's spec is kept whole).
func stripMeta(obj any) (any, error) {
	if np, ok := obj.(*networkingv1.NetworkPolicy); ok {
		np.ManagedFields, np.Annotations = nil, nil
	}
	return obj, nil
}

// keepNamespace keeps a Namespace's name, UID and labels.
func keepNamespace(ns *corev1.Namespace) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels,
	}}
}
