package k8sflowprocessor

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flowtel/flowtel/processor/k8sflowprocessor/internal/metadata"
)

// The test cluster (IPv4 and IPv6 for everything):
//
//	node-a (the local Node): 172.18.0.3 / fd91:8054:ef1f::3, podCIDR 10.244.1.0/24 / fd00:10:244:1::/64 (gateway .1 / ::1)
//	node-b (remote):         172.18.0.4 / fd91:8054:ef1f::4, podCIDR 10.244.2.0/24 / fd00:10:244:2::/64
//	web-a  on node-a: 10.244.1.6 / fd00:10:244:1::6   ReplicaSet web-7d4f → Deployment web
//	client on node-a: 10.244.1.5 / fd00:10:244:1::5   DaemonSet agent
//	db-b   on node-b: 10.244.2.7 / fd00:10:244:2::7   StatefulSet db (named by an EndpointSlice on node-a)
//	Service default/web: ClusterIP 10.96.26.133 / fd00:10:96::5edc, port 80 "http" → NodePort 30080,
//	   LoadBalancer ingress 203.0.113.10, externalIP 198.51.100.7
//	Service kube-system/kube-dns: 10.96.0.10, 53/UDP "dns", 53/TCP "dns-tcp"
//	Service default/db: 10.96.5.5, one unnamed port 5432
type family struct {
	name                        string
	nodeA, nodeB, gwA, gwB      string
	webA, client, dbB           string
	clusterIP, external, extSrc string
}

var (
	v4 = family{name: "IPv4", nodeA: "172.18.0.3", nodeB: "172.18.0.4", gwA: "10.244.1.1", gwB: "10.244.2.1",
		webA: "10.244.1.6", client: "10.244.1.5", dbB: "10.244.2.7", clusterIP: "10.96.26.133", external: "8.8.8.8", extSrc: "100.64.0.9"}
	v6 = family{name: "IPv6", nodeA: "fd91:8054:ef1f::3", nodeB: "fd91:8054:ef1f::4", gwA: "fd00:10:244:1::1", gwB: "fd00:10:244:2::1",
		webA: "fd00:10:244:1::6", client: "fd00:10:244:1::5", dbB: "fd00:10:244:2::7", clusterIP: "fd00:10:96::5edc", external: "2001:4860:4860::8888", extSrc: "fd00:ea2e::9"}
	families = []family{v4, v6}
)

// testClusterUID is the test cluster's kube-system Namespace UID.
const testClusterUID = "6c0e5a3b-1d2f-4e8a-9b7c-0a1b2c3d4e5f"

// t0 is when the test cluster's Pods were created.
var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func testNode(name, uid string, addrs []string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)},
		Spec:       corev1.NodeSpec{PodCIDR: cidrs[0], PodCIDRs: cidrs},
	}
	for i, a := range addrs {
		typ := corev1.NodeInternalIP
		if i >= 2 {
			typ = corev1.NodeExternalIP
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: typ, Address: a})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

func testPod(ns, name, uid, node string, created time.Time, owner *metav1.OwnerReference, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid),
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{"app": name},
			Annotations:       map[string]string{"stripped": "yes"}},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
	}
	return p
}

func controller(kind, name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{Kind: kind, Name: name, APIVersion: "apps/v1", UID: types.UID("uid-" + name), Controller: ptr(true)}
}

func clusterObjects() []runtime.Object {
	return []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: testClusterUID}},
		testNode("node-a", "uid-node-a", []string{v4.nodeA, v6.nodeA}, "10.244.1.0/24", "fd00:10:244:1::/64"),
		testNode("node-b", "uid-node-b", []string{v4.nodeB, v6.nodeB}, "10.244.2.0/24", "fd00:10:244:2::/64"),
		testPod("default", "web-a", "uid-web-a", "node-a", t0, controller("ReplicaSet", "web-7d4f"), v4.webA, v6.webA),
		testPod("default", "client", "uid-client", "node-a", t0, controller("DaemonSet", "agent"), v4.client, v6.client),
		testPod("default", "db-b", "uid-db-b", "node-b", t0, controller("StatefulSet", "db"), v4.dbB, v6.dbB),
		// A hostNetwork Pod shows its Node's address: it must never own it.
		func() *corev1.Pod {
			p := testPod("kube-system", "kube-proxy-a", "uid-kp-a", "node-a", t0, controller("DaemonSet", "kube-proxy"), v4.nodeA, v6.nodeA)
			p.Spec.HostNetwork = true
			return p
		}(),
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-7d4f", UID: "uid-web-7d4f",
			OwnerReferences: []metav1.OwnerReference{*controller("Deployment", "web")}}},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-svc-web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: v4.clusterIP, ClusterIPs: []string{v4.clusterIP, v6.clusterIP},
				ExternalIPs: []string{"198.51.100.7"},
				Ports:       []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.10"}}}},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns", UID: "uid-svc-dns"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}, {Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53}}},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", UID: "uid-svc-db"},
			Spec:       corev1.ServiceSpec{ClusterIP: "10.96.5.5", Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 5432}}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "db-x1", UID: "uid-eps-db"},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{v4.dbB},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "db-b", UID: "uid-db-b"},
				NodeName:  ptr("node-b")}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "db-x2", UID: "uid-eps-db6"},
			AddressType: discoveryv1.AddressTypeIPv6,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{v6.dbB},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "db-b", UID: "uid-db-b"},
				NodeName:  ptr("node-b")}},
		},
	}
}

// fakeClock is a settable clock for the Index, which its informers'
// goroutines read while a test sets it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// startProcessor runs a k8s_flow processor against a fake clientset holding
// objs, with caches synced.
func startProcessor(t testing.TB, cfg *Config, clock *fakeClock, objs ...runtime.Object) (*k8sFlowProcessor, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	set := processortest.NewNopSettings(metadata.Type)
	p, err := newProcessor(set, cfg, func(*Config) (kubernetes.Interface, error) { return cs, nil }, clock.now)
	require.NoError(t, err)
	require.NoError(t, p.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.shutdown(context.Background())) })
	return p, cs
}

func nodeConfig(node string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.NodeName = node
	cfg.WaitForSyncTimeout = 10 * time.Second
	return cfg
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// eventually polls cond until it holds or 5 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 10*time.Millisecond, what)
}

// createJob is a Job owned by a CronJob.
func cronJob(name, cron string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
		OwnerReferences: []metav1.OwnerReference{{Kind: "CronJob", Name: cron, APIVersion: "batch/v1", UID: "uid-cron", Controller: ptr(true)}}}}
}

func processortestSettings() processor.Settings { return processortest.NewNopSettings(metadata.Type) }
