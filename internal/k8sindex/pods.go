package k8sindex

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flowtel/flowtel/internal/netpol"
)

// pod is what the Index keeps of a Pod. Strings are shared with the
// (stripped) object in the informer cache.
type pod struct {
	namespace, name, uid string
	labels               map[string]string
	// oldLabels are the label sets labels replaced, oldest first, each
	// with when it was replaced (Options.NetworkPolicies; bounded).
	oldLabels []version[map[string]string]
	// ports are the containers' named ports (Options.NetworkPolicies).
	ports    []netpol.ContainerPort
	owner    ownerRef // the Pod's controller (ReplicaSet, StatefulSet, DaemonSet, Job, ...)
	nodeName string
	ips      []netip.Addr
	// created is the Pod's creation time: no connection before it is the Pod's.
	created time.Time
	// ended is when the Pod stopped owning its IPs (deleted or terminated);
	// zero while it runs. It is purged DeletedPodRetention after that.
	ended time.Time
}

// owns reports whether the Pod owned its IPs at t.
func (p *pod) owns(t time.Time) bool {
	return !t.Before(p.created) && (p.ended.IsZero() || t.Before(p.ended))
}

// labelsAt returns the Pod's labels at t.
func (p *pod) labelsAt(t time.Time) map[string]string {
	for i := range p.oldLabels {
		if t.Before(p.oldLabels[i].to) {
			return p.oldLabels[i].v
		}
	}
	return p.labels
}

// podObject is what the Pod informer stores instead of a Pod: the fields
// the Index reads, already parsed. A stripped corev1.Pod would still weigh
// 1.2 kB of empty spec and status structs.
type podObject struct {
	metav1.ObjectMeta // name, namespace, UID, labels (option), controller, creation time
	nodeName          string
	hostNetwork       bool
	terminated        bool
	finishedAt        time.Time // latest container finish of a terminated Pod
	ips               []netip.Addr
	ports             []netpol.ContainerPort // named container ports (Options.NetworkPolicies)
}

func (p *podObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (p *podObject) DeepCopyObject() runtime.Object {
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.ips = slices.Clone(p.ips)
	c.ports = slices.Clone(p.ports)
	return &c
}

// stripPod is the Pod informer's transform: the cache never holds specs,
// container statuses, annotations or managed fields.
func stripPod(keepLabels, keepPorts bool) func(any) (any, error) {
	return func(obj any) (any, error) {
		in, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil // a DeletedFinalStateUnknown tombstone: keep as is
		}
		out := &podObject{
			ObjectMeta: metav1.ObjectMeta{
				Name: in.Name, Namespace: in.Namespace, UID: in.UID,
				ResourceVersion:   in.ResourceVersion,
				CreationTimestamp: in.CreationTimestamp,
			},
			nodeName:    in.Spec.NodeName,
			hostNetwork: in.Spec.HostNetwork,
			terminated:  in.Status.Phase == corev1.PodSucceeded || in.Status.Phase == corev1.PodFailed,
			ips:         podIPs(in),
		}
		if keepLabels {
			out.Labels = in.Labels
		}
		if keepPorts {
			out.ports = netpol.ContainerPorts(&in.Spec)
		}
		if c := metav1.GetControllerOfNoCopy(in); c != nil {
			out.OwnerReferences = []metav1.OwnerReference{{Kind: c.Kind, Name: c.Name}}
		}
		if out.terminated {
			out.finishedAt = finishedAt(in)
		}
		return out, nil
	}
}

// finishedAt is the latest container finish time of a terminated Pod.
func finishedAt(p *corev1.Pod) time.Time {
	var end time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(end) {
			end = t.FinishedAt.Time
		}
	}
	return end
}

func podIPs(p *corev1.Pod) []netip.Addr {
	ips := appendAddr(nil, p.Status.PodIP)
	for _, ip := range p.Status.PodIPs {
		ips = appendAddr(ips, ip.IP)
	}
	return ips
}

// appendAddr appends the address s (unmapped) to addrs unless it is there
// already or s is not an address (empty, or a headless Service's "None").
func appendAddr(addrs []netip.Addr, s string) []netip.Addr {
	if a, err := netip.ParseAddr(s); err == nil && !contains(addrs, a.Unmap()) {
		return append(addrs, a.Unmap())
	}
	return addrs
}

// upsertPod records a Pod add or update.
func (ix *Index) upsertPod(in *podObject) {
	if in.hostNetwork {
		// hostNetwork Pods share the Node's addresses: they never own an IP
		// (the Node endpoint covers them).
		ix.deletePod(in)
		return
	}
	if !ix.opts.AllPods && in.nodeName != ix.opts.NodeName {
		// The field selector already filters; this guards caches that do not
		// honour it and Pods that move before they are bound.
		ix.deletePod(in)
		return
	}
	now := ix.opts.Now()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.purgeLocked(now)
	uid := string(in.UID)
	p := ix.pods[uid]
	if p == nil {
		p = &pod{uid: uid}
		ix.pods[uid] = p
	} else if !p.ended.IsZero() {
		return // an ended Pod never owns an IP again
	}
	p.namespace, p.name, p.nodeName = in.Namespace, in.Name, in.nodeName
	labels := in.Labels
	if labels == nil && (ix.opts.PodLabels || ix.opts.NetworkPolicies) {
		labels = map[string]string{} // collected, none set
	}
	if ix.opts.NetworkPolicies {
		if p.labels != nil && !maps.Equal(p.labels, labels) {
			if len(p.oldLabels) == maxVersions {
				p.oldLabels = slices.Delete(p.oldLabels, 0, 1)
			}
			p.oldLabels = append(p.oldLabels, version[map[string]string]{to: now, v: p.labels})
		}
		cutoff := now.Add(-ix.opts.DeletedPodRetention)
		for len(p.oldLabels) > 0 && p.oldLabels[0].to.Before(cutoff) {
			p.oldLabels = p.oldLabels[1:]
		}
		p.ports = in.ports
	}
	p.labels = labels
	p.created = in.CreationTimestamp.Time
	if len(in.OwnerReferences) > 0 {
		o := in.OwnerReferences[0]
		p.owner = ownerRef{kind: o.Kind, name: o.Name}
	} else {
		p.owner = ownerRef{}
	}
	ix.setPodIPsLocked(p, in.ips)
	if in.terminated {
		// A Pod past its containers' end still shows its IPs, but the IP is
		// free for the next Pod: it only names connections started before.
		end := in.finishedAt
		if end.IsZero() || end.After(now) {
			end = now
		}
		ix.endLocked(p, end)
	}
}

// setPodIPsLocked moves p to the IP lists of ips.
func (ix *Index) setPodIPsLocked(p *pod, ips []netip.Addr) {
	for _, old := range p.ips {
		if !contains(ips, old) {
			ix.unlinkIPLocked(p, old)
		}
	}
	for _, ip := range ips {
		if !contains(p.ips, ip) {
			ix.podsByIP[ip] = append(ix.podsByIP[ip], p)
		}
	}
	p.ips = ips
}

func (ix *Index) unlinkIPLocked(p *pod, ip netip.Addr) {
	list := ix.podsByIP[ip]
	for i, q := range list {
		if q == p {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(ix.podsByIP, ip)
	} else {
		ix.podsByIP[ip] = list
	}
}

// deletePod marks a Pod ended; it stays resolvable for connections that
// started before, until DeletedPodRetention has passed.
func (ix *Index) deletePod(in *podObject) {
	now := ix.opts.Now()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.purgeLocked(now)
	if p := ix.pods[string(in.UID)]; p != nil && p.ended.IsZero() {
		ix.endLocked(p, now)
	}
}

func (ix *Index) endLocked(p *pod, at time.Time) {
	p.ended = at
	ix.ended = append(ix.ended, p)
}

// purgeLocked removes Pods, and EndpointSlice listings, that ended more
// than DeletedPodRetention ago.
func (ix *Index) purgeLocked(now time.Time) {
	cutoff := now.Add(-ix.opts.DeletedPodRetention)
	ix.purgeSliceOwnersLocked(cutoff)
	kept := ix.ended[:0]
	for _, p := range ix.ended {
		if !p.ended.Before(cutoff) {
			kept = append(kept, p)
			continue
		}
		for _, ip := range p.ips {
			ix.unlinkIPLocked(p, ip)
		}
		delete(ix.pods, p.uid)
	}
	clear(ix.ended[len(kept):])
	ix.ended = kept
}

// Purge drops Pods past their retention; the informer loop calls it periodically.
func (ix *Index) Purge() {
	now := ix.opts.Now()
	ix.mu.Lock()
	ix.purgeLocked(now)
	ix.mu.Unlock()
}

// podAt returns the Pod that owned addr at t (zero t: now). When several
// did (an IP reused within the retention window), the latest-created wins.
func (ix *Index) podAt(addr netip.Addr, t time.Time) *pod {
	return ownerAt(ix, ix.podsByIP[addr], t, func(p, best *pod) bool { return p.created.After(best.created) })
}

// ownerAt is, of the owners of an address, the one that owned it at t (zero
// t: now) and that, of those that did, replaces the best so far whenever
// replaces says so; nil when none did.
func ownerAt[O interface {
	comparable
	owns(time.Time) bool
}](ix *Index, owners []O, t time.Time, replaces func(o, best O) bool) O {
	var best, none O
	if len(owners) == 0 {
		return none
	}
	if t.IsZero() {
		t = ix.opts.Now()
	}
	for _, o := range owners {
		if o.owns(t) && (best == none || replaces(o, best)) {
			best = o
		}
	}
	return best
}

func contains(ips []netip.Addr, ip netip.Addr) bool {
	for _, have := range ips {
		if have == ip {
			return true
		}
	}
	return false
}
