package k8sindex

import (
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EndpointSlices name the Pods a node collector does not watch (other Nodes'
// Pods, with pods: local). They carry no Pod creation time, so the time an
// address is attributed to a Pod is the time the Index saw a slice list it:
// an address keeps the history of the Pods listed for it, as podsByIP does
// for watched Pods (decision D7), and a connection is named after the Pod that
// was listed when it started.

// sliceOwner is one Pod listed for one address, over the time it was listed.
type sliceOwner struct {
	addr                                 netip.Addr
	namespace, podName, podUID, nodeName string
	// since is when the Pod got the address: when a slice first listed it
	// while another Pod was listed, else when the previous Pod's listing
	// ended; zero when the address had no known owner before (e.g. listed
	// when the Index started).
	since time.Time
	// until is when the last slice listing it dropped it; zero while listed.
	until time.Time
	// listings counts the slices listing it now (two Services can select one Pod).
	listings int
}

func (o *sliceOwner) owns(t time.Time) bool {
	return !t.Before(o.since) && (o.until.IsZero() || t.Before(o.until))
}

func (o *sliceOwner) is(namespace, name, uid, node string) bool {
	return o.namespace == namespace && o.podName == name && o.podUID == uid && o.nodeName == node
}

// endpointSlice remembers the owners a slice lists, to release them when it
// changes or goes.
type endpointSlice struct{ listed []*sliceOwner }

// keepEndpointSlice keeps, per endpoint, the addresses, the Pod reference and the Node.
func keepEndpointSlice(in *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace, UID: in.UID, ResourceVersion: in.ResourceVersion},
		AddressType: in.AddressType,
	}
	for _, e := range in.Endpoints {
		if e.TargetRef == nil || e.TargetRef.Kind != "Pod" {
			continue
		}
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{
			Addresses: e.Addresses,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: e.TargetRef.Namespace, Name: e.TargetRef.Name, UID: e.TargetRef.UID},
			NodeName:  e.NodeName,
		})
	}
	return out
}

func (ix *Index) upsertEndpointSlice(in *discoveryv1.EndpointSlice) {
	key := in.Namespace + "/" + in.Name
	now := ix.opts.Now()
	s := &endpointSlice{}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	// List the new version before releasing the old one, so an address both
	// list never looks unlisted in between.
	for _, e := range in.Endpoints {
		if e.TargetRef == nil || e.TargetRef.Kind != "Pod" || e.NodeName == nil {
			continue
		}
		ns := e.TargetRef.Namespace
		if ns == "" {
			ns = in.Namespace
		}
		for _, s2 := range e.Addresses {
			if a, err := netip.ParseAddr(s2); err == nil {
				s.listed = append(s.listed, ix.listLocked(a.Unmap(), ns, e.TargetRef.Name, string(e.TargetRef.UID), *e.NodeName, now))
			}
		}
	}
	ix.removeEndpointSliceLocked(key, now)
	ix.slices[key] = s
}

func (ix *Index) deleteEndpointSlice(namespace, name string) {
	now := ix.opts.Now()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeEndpointSliceLocked(namespace+"/"+name, now)
}

func (ix *Index) removeEndpointSliceLocked(key string, now time.Time) {
	s := ix.slices[key]
	if s == nil {
		return
	}
	delete(ix.slices, key)
	for _, o := range s.listed {
		if o.listings--; o.listings == 0 {
			o.until = now
			ix.endedSliceOwners = append(ix.endedSliceOwners, o)
		}
	}
}

// listLocked counts one more slice listing addr for the Pod, and returns its owner entry.
func (ix *Index) listLocked(addr netip.Addr, namespace, name, uid, node string, now time.Time) *sliceOwner {
	owners := ix.sliceOwners[addr]
	listed := false
	var freed time.Time // the latest end of another Pod's listing
	for _, o := range owners {
		if o.is(namespace, name, uid, node) {
			// Listed by another slice too, or listed again (moved between slices).
			o.listings++
			o.until = time.Time{}
			return o
		}
		if o.until.IsZero() {
			listed = true
		} else if o.until.After(freed) {
			freed = o.until
		}
	}
	since := freed // the address was free from then
	if listed {
		since = now // another Pod is still listed: this one is newer from now on
	}
	o := &sliceOwner{addr: addr, namespace: namespace, podName: name, podUID: uid, nodeName: node, since: since, listings: 1}
	ix.sliceOwners[addr] = append(owners, o)
	return o
}

// sliceOwnerAt is the Pod listed for addr at t (zero: now); when several
// were (a stale slice), the one listed last.
func (ix *Index) sliceOwnerAt(addr netip.Addr, t time.Time) *sliceOwner {
	return ownerAt(ix, ix.sliceOwners[addr], t, func(o, best *sliceOwner) bool { return !o.since.Before(best.since) })
}

// purgeSliceOwnersLocked forgets owners no slice has listed since before cutoff.
func (ix *Index) purgeSliceOwnersLocked(cutoff time.Time) {
	kept := ix.endedSliceOwners[:0]
	for _, o := range ix.endedSliceOwners {
		switch {
		case o.until.IsZero(): // listed again: no longer ended
		case !o.until.Before(cutoff):
			kept = append(kept, o)
		default:
			ix.unlistOwnerLocked(o)
		}
	}
	clear(ix.endedSliceOwners[len(kept):])
	ix.endedSliceOwners = kept
}

func (ix *Index) unlistOwnerLocked(o *sliceOwner) {
	owners := ix.sliceOwners[o.addr]
	for i, q := range owners {
		if q == o {
			owners = append(owners[:i:i], owners[i+1:]...)
			break
		}
	}
	if len(owners) == 0 {
		delete(ix.sliceOwners, o.addr)
	} else {
		ix.sliceOwners[o.addr] = owners
	}
}
