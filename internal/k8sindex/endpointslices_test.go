package k8sindex

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// remoteDB is the address a node collector on Node "a" knows only from
// EndpointSlices: a Pod on Node "b".
const remoteDB = "10.2.0.7"

// slice lists addr for the Pod pod on Node "b".
func slice(name, addr, pod string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}, NodeName: ptr("b"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: types.UID("uid-" + pod)}}},
	}
}

// sliceIndex is a node collector's index on Node "a" with a settable clock.
func sliceIndex(clock *time.Time) *Index {
	ix := New(Options{NodeName: "a", Now: func() time.Time { return *clock }})
	ix.upsertNode(testNode("a", "10.1.0.0/24"))
	ix.upsertNode(testNode("b", "10.2.0.0/24"))
	return ix
}

// podNameAt is the Pod name the index gives addr for a connection started at start.
func podNameAt(ix *Index, addr string, start time.Time) string {
	ep := flowrecord.Endpoint{Address: netip.MustParseAddr(addr)}
	v := ix.Read()
	defer v.Done()
	v.ResolveEndpoint(&ep, start)
	return ep.PodName
}

// After an IP is reused by a new Pod, a connection that started while the
// old Pod was listed keeps the old Pod's name; one that started after gets
// the new Pod's, whether the slice is updated in place or replaced.
func TestEndpointSliceNamesAreTimeAware(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		reuse func(ix *Index)
	}{
		{"slice updated", func(ix *Index) { ix.upsertEndpointSlice(slice("db-1", remoteDB, "db-new")) }},
		{"slice replaced", func(ix *Index) {
			ix.deleteEndpointSlice("default", "db-1")
			ix.upsertEndpointSlice(slice("db-2", remoteDB, "db-new"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			ix := sliceIndex(&now)
			ix.upsertEndpointSlice(slice("db-1", remoteDB, "db-old"))
			oldConn := t0.Add(time.Second)
			now = t0.Add(10 * time.Second)
			tc.reuse(ix)
			newConn := t0.Add(11 * time.Second)
			now = t0.Add(20 * time.Second)

			assert.Equal(t, "db-old", podNameAt(ix, remoteDB, oldConn), "a connection that started before the IP was reused")
			assert.Equal(t, "db-new", podNameAt(ix, remoteDB, newConn), "a connection that started after")
			assert.Equal(t, "db-new", podNameAt(ix, remoteDB, time.Time{}), "now")
			assert.Equal(t, "db-old", podNameAt(ix, remoteDB, t0.Add(-time.Hour)), "listed before the index started: owner since unknown")

			// The old Pod is forgotten deleted_pod_retention after no slice lists it.
			now = t0.Add(10*time.Second + DefaultDeletedPodRetention + time.Second)
			ix.Purge()
			assert.Equal(t, "", podNameAt(ix, remoteDB, oldConn), "old listing purged")
			assert.Equal(t, "db-new", podNameAt(ix, remoteDB, newConn))
		})
	}
}

// Two slices (two Services selecting the same Pod) list one address:
// removing one of them leaves the address named.
func TestEndpointSliceRemovalKeepsAddressListedElsewhere(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ix := sliceIndex(&now)
	ix.upsertEndpointSlice(slice("web-1", remoteDB, "db"))
	ix.upsertEndpointSlice(slice("api-1", remoteDB, "db"))
	now = now.Add(time.Minute)
	ix.deleteEndpointSlice("default", "web-1")
	assert.Equal(t, "db", podNameAt(ix, remoteDB, time.Time{}), "still listed by api-1")
	ix.upsertEndpointSlice(slice("api-1", "10.2.0.8", "db")) // api-1 drops the address too
	start := now.Add(time.Second)
	now = now.Add(time.Hour)
	ix.Purge()
	assert.Equal(t, "", podNameAt(ix, remoteDB, start), "listed by no slice, past retention")
	assert.Equal(t, "db", podNameAt(ix, "10.2.0.8", start))
	assert.Equal(t, 1, ix.Sizes().EndpointSlices)
}
