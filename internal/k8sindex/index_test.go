package k8sindex

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGatewayAddress(t *testing.T) {
	assert.Equal(t, netip.MustParseAddr("10.244.1.1"), GatewayAddress(netip.MustParsePrefix("10.244.1.0/24")))
	assert.Equal(t, netip.MustParseAddr("10.244.1.1"), GatewayAddress(netip.MustParsePrefix("10.244.1.77/24")))
	assert.Equal(t, netip.MustParseAddr("fd00:10:244:1::1"), GatewayAddress(netip.MustParsePrefix("fd00:10:244:1::/64")))
}

func testNode(name string, cidrs ...string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
}

// Nodes with podCIDRs of different sizes (and an IPv4-mapped one) are all
// found; a Node's update replaces its addresses.
func TestNodeSubnets(t *testing.T) {
	ix := New(Options{NodeName: "a"})
	ix.upsertNode(testNode("a", "10.1.0.0/24", "fd00:1::/64"))
	ix.upsertNode(testNode("b", "10.2.0.0/23"))
	ix.upsertNode(testNode("c", "::ffff:10.3.0.0/120"))
	resolve := func(s string) flowrecord.Endpoint {
		ep := flowrecord.Endpoint{Address: netip.MustParseAddr(s)}
		v := ix.Read()
		defer v.Done()
		v.ResolveEndpoint(&ep, time.Time{})
		return ep
	}
	assert.Equal(t, flowrecord.EndpointNode, resolve("10.2.0.1").Kind)
	assert.Equal(t, "b", resolve("10.2.1.200").NodeName)
	assert.Equal(t, flowrecord.EndpointPod, resolve("10.2.1.200").Kind)
	assert.Equal(t, "c", resolve("10.3.0.7").NodeName)
	assert.Equal(t, flowrecord.EndpointNode, resolve("::ffff:10.3.0.1").Kind, "IPv4-mapped addresses are unmapped")
	assert.Equal(t, "a", resolve("fd00:1::1234").NodeName)
	assert.Equal(t, flowrecord.EndpointExternal, resolve("10.2.2.1").Kind)

	ix.upsertNode(testNode("b", "10.9.0.0/24"))
	assert.Equal(t, flowrecord.EndpointExternal, resolve("10.2.0.1").Kind, "old podCIDR gone")
	assert.Equal(t, flowrecord.EndpointNode, resolve("10.9.0.1").Kind)
	ix.deleteNode("b")
	assert.Equal(t, flowrecord.EndpointExternal, resolve("10.9.0.5").Kind)
	assert.Equal(t, []int{24}, ix.cidrBits[0], "prefix lengths recounted")
}

// The Pod transform keeps only what is used.
func TestStripPod(t *testing.T) {
	in := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{"big": "x"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ConfigMap", Name: "not-controller"}, {Kind: "ReplicaSet", Name: "rs", Controller: ptr(true)}}},
		Spec:   corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "i", Env: []corev1.EnvVar{{Name: "X"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", ContainerStatuses: []corev1.ContainerStatus{{Name: "c"}}},
	}
	out, err := stripPod(false, false)(in)
	require.NoError(t, err)
	p := out.(*podObject)
	assert.Nil(t, p.Labels)
	assert.Nil(t, p.Annotations)
	assert.Nil(t, p.ManagedFields)
	assert.Equal(t, []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs"}}, p.OwnerReferences)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("10.0.0.1")}, p.ips)
	assert.Equal(t, "n", p.nodeName)
	out, _ = stripPod(true, false)(in)
	assert.Equal(t, map[string]string{"a": "b"}, out.(*podObject).Labels)
	c := out.(*podObject).DeepCopyObject().(*podObject)
	c.Labels["a"] = "changed"
	assert.Equal(t, "b", out.(*podObject).Labels["a"], "deep copy")
}

func ptr[T any](v T) *T { return &v }

// BenchmarkMemoryPer10kPods reports the live heap of 10,000 Pods as the
// cache holds them: the stripped objects the informer store keeps plus the
// Index entries (dual-stack IPs, labels and an owner each).
func BenchmarkMemoryPer10kPods(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ix := New(Options{AllPods: true, PodLabels: true})
		strip := stripPod(true, false)
		store := make([]any, 0, n) // what the informer's store keeps
		for i := range n {
			full := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-7d4f9c-%05d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("8c1e4b2a-0000-4000-8000-%012d", i)),
					ResourceVersion: "123456", CreationTimestamp: metav1.Now(),
					Labels:          map[string]string{"app": "web", "pod-template-hash": "7d4f9c"},
					OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-7d4f9c", Controller: ptr(true)}}},
				Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%03d", i%100)},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.%d.%d.%d", 1+i/65536, (i/256)%256, i%256),
					PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.%d.%d.%d", 1+i/65536, (i/256)%256, i%256)}, {IP: fmt.Sprintf("fd00::%x", i+1)}}},
			}
			s, _ := strip(full)
			store = append(store, s)
			ix.upsertPod(s.(*podObject))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB/10k-pods")
		runtime.KeepAlive(store)
		runtime.KeepAlive(ix)
	}
}

// A Service update replaces its front ends; a deletion removes them, but
// never another Service's that took over an address.
func TestServiceUpdates(t *testing.T) {
	ix := New(Options{NodeName: "a"})
	ix.upsertNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}}})
	svc := func(uid, name, ip, portName string, port, nodePort int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Name: portName, Port: port, NodePort: nodePort}}}}
	}
	name := func(a string, port uint16) string {
		v := ix.Read()
		defer v.Done()
		if sp := v.Service(netip.MustParseAddr(a), port, 6); sp != nil {
			return sp.PortName
		}
		return ""
	}
	ix.upsertService(svc("u1", "web", "10.96.0.1", "http", 80, 30080))
	assert.Equal(t, "ns/web:http", name("10.96.0.1", 80))
	assert.Equal(t, "ns/web:http", name("192.0.2.1", 30080))
	assert.Equal(t, "ns/web:http", name("::ffff:10.96.0.1", 80), "IPv4-mapped")

	ix.upsertService(svc("u1", "web", "10.96.0.1", "", 8080, 0))
	assert.Equal(t, "", name("10.96.0.1", 80), "old port gone")
	assert.Equal(t, "", name("192.0.2.1", 30080), "old NodePort gone")
	assert.Equal(t, "ns/web", name("10.96.0.1", 8080))

	// Another Service reuses the address after u1 is recreated elsewhere.
	ix.upsertService(svc("u2", "api", "10.96.0.1", "grpc", 8080, 0))
	ix.deleteService("u1")
	assert.Equal(t, "ns/api:grpc", name("10.96.0.1", 8080), "u1's deletion leaves u2's front end")
	ix.upsertService(svc("u3", "headless", "None", "x", 1, 0))
	assert.Equal(t, 2, ix.Sizes().Services)
}
