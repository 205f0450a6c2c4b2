//go:build integration

package k8sflowprocessor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

// TestAgainstKubeAPIServer runs the processor against a real kube-apiserver
// and etcd (built from Go modules by testbed/controlplane/build.sh, cached):
// objects created through the API, informers synced, updates and deletions
// reflected, and RBAC with the documented ClusterRole.
func TestAgainstKubeAPIServer(t *testing.T) {
	cp, granted := clusterWithRole(t)
	ctx := context.Background()
	admin := cp.Admin
	denied := cp.ServiceAccount(t, "flowtel", "no-rights")

	// Nodes (addresses through the status subresource, by clusterWithRole),
	// Pods (bound to a Node; IPs and phase through the status subresource), Services.
	createPod(t, admin, "web-a", "node-a", v4.webA, v6.webA)
	createPod(t, admin, "db-b", "node-b", v4.dbB, v6.dbB)
	_, err := admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web-a"},
			IPFamilyPolicy: ptr(corev1.IPFamilyPolicyRequireDualStack), ClusterIP: v4.clusterIP, ClusterIPs: []string{v4.clusterIP, v6.clusterIP},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The granted ServiceAccount runs the processor (auth_type kubeConfig).
	cfg := nodeConfig("node-a")
	cfg.AuthType, cfg.KubeConfig = "kubeConfig", cp.Kubeconfig(t, "node-collector", granted)
	p, err := newProcessor(processortestSettings(), cfg, newClient, time.Now)
	require.NoError(t, err)
	require.NoError(t, p.start(ctx, nil))
	t.Cleanup(func() { require.NoError(t, p.shutdown(ctx)) })

	enrich := func(c flowCase) *flowrecord.Record {
		r := c.record()
		r.Start = time.Now()
		reason, _ := p.enrich(r)
		require.Empty(t, reason, c.name)
		return r
	}
	for _, f := range families {
		seed := issue8260Cases(f)
		r := enrich(seed[0]) // Node → local Pod
		assert.Equal(t, flowrecord.FlowTypeIntraNode, r.FlowType, f.name)
		assert.Equal(t, "web-a", r.Destination.PodName, f.name)
		assert.Equal(t, "node-a", r.Source.NodeName, f.name)
		r = enrich(seed[2]) // destination half of Node → remote Pod
		assert.Equal(t, flowrecord.FlowTypeInterNode, r.FlowType, f.name)
		assert.Equal(t, flowrecord.SideDestination, r.Reporter.Side, f.name)
		assert.Equal(t, "node-b", r.Source.NodeName, f.name)
		r = enrich(seed[3]) // Node → ClusterIP → Pod
		assert.Equal(t, "default/web:http", r.Service.PortName, f.name)
		r = enrich(flowCase{name: "NodePort", reporter: "node-a", src: hp(f.extSrc, 5000), origDst: hp(f.nodeB, 30080), dst: hp(f.webA, 80)})
		assert.Equal(t, "default/web:http", r.Service.PortName, f.name)
		assert.Equal(t, flowrecord.FlowTypeFromExternal, r.FlowType, f.name)
	}
	assert.Equal(t, 1, p.ix.Sizes().Pods, "only node-a's Pods (spec.nodeName field selector)")

	// Updates are reflected: a new Pod gets its IP, a Node's podCIDR changes.
	createPod(t, admin, "late", "node-a", "10.244.1.40")
	eventually(t, "new Pod", func() bool {
		return enrich(flowCase{reporter: "node-a", src: hp("10.244.1.40", 1), dst: hp(v4.external, 2)}).Source.PodName == "late"
	})
	nodeB, err := admin.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
	require.NoError(t, err)
	nodeB.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.44"}}
	_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, nodeB, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "Node address update", func() bool {
		return enrich(flowCase{reporter: "node-a", src: hp(v4.webA, 1), dst: hp("172.18.0.44", 2)}).Destination.Kind == flowrecord.EndpointNode
	})

	// Deletions are reflected; a deleted Pod still names older connections.
	before := time.Now()
	require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, "late", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}))
	require.NoError(t, admin.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}))
	eventually(t, "Pod and Service deletion", func() bool {
		r := enrich(flowCase{reporter: "node-a", src: hp("10.244.1.40", 1), origDst: hp(v4.clusterIP, 80), dst: hp(v4.webA, 80)})
		return r.Source.PodName == "" && r.Service.PortName == ""
	})
	r := flowCase{reporter: "node-a", src: hp("10.244.1.40", 1), dst: hp(v4.external, 2)}.record()
	r.Start = before
	require.Empty(t, first(p.enrich(r)))
	assert.Equal(t, "late", r.Source.PodName, "deleted Pod resolvable for connections that started before")

	// Without the ClusterRole the processor fails to start, naming resource and verb.
	cfg = nodeConfig("node-a")
	cfg.AuthType, cfg.KubeConfig, cfg.WaitForSyncTimeout = "kubeConfig", cp.Kubeconfig(t, "no-rights", denied), 10*time.Second
	err = startErr(t, cfg, newClient)
	require.Error(t, err)
	t.Logf("start without the ClusterRole: %v", err)
	for _, res := range []string{"pods", "nodes", "services", "endpointslices.discovery.k8s.io", "replicasets.apps", "jobs.batch"} {
		assert.Contains(t, err.Error(), "list "+res+": forbidden by RBAC")
	}
	assert.Contains(t, err.Error(), "system:serviceaccount:flowtel:no-rights")
}

// createNodes creates the test cluster's Nodes (addresses through the status subresource).
func createNodes(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	for _, n := range clusterObjects() {
		node, ok := n.(*corev1.Node)
		if !ok {
			continue
		}
		created, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}, Spec: node.Spec}, metav1.CreateOptions{})
		require.NoError(t, err)
		created.Status.Addresses = node.Status.Addresses
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// TestLateIdentityAgainstKubeAPIServer: a Pod whose IPs are written to its
// status (as the kubelet does, 1.5 s after the traffic starts) still names
// its connections, IPv4 and IPv6, with the default hold; an address no Pod
// ever gets is exported unresolved once the hold is up, and counted.
func TestLateIdentityAgainstKubeAPIServer(t *testing.T) {
	cp, granted := clusterWithRole(t)
	ctx := context.Background()
	admin := cp.Admin
	createPod(t, admin, "late", "node-a") // scheduled, no IP yet

	cfg := nodeConfig("node-a") // the default hold_unresolved
	cfg.AuthType, cfg.KubeConfig = "kubeConfig", cp.Kubeconfig(t, "node-collector", granted)
	h := startHolding(t, cfg, newClient, time.Now)

	const lateV4, lateV6, never = "10.244.1.50", "fd00:10:244:1::50", "10.244.1.51"
	start := time.Now()
	conn := func(src, dst string) *flowrecord.Record {
		r := flowCase{reporter: "node-a", src: hp(src, 40000), dst: hp(dst, 443)}.record()
		r.Start, r.End = start, start.Add(time.Second)
		return r
	}
	h.send(t, conn(lateV4, v4.external), conn(lateV6, v6.external), conn(never, v4.external))
	assert.Empty(t, h.exported(t), "held while their Pod is unknown")

	time.Sleep(1500 * time.Millisecond)
	p, err := admin.CoreV1().Pods("default").Get(ctx, "late", metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.PodIP, p.Status.PodIPs = lateV4, []corev1.PodIP{{IP: lateV4}, {IP: lateV6}}
	_, err = admin.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)

	eventually(t, "the Pod's late IPs name the held records", func() bool { return len(h.exported(t)) >= 2 })
	named := time.Since(start)
	got := h.exported(t)
	for _, a := range []string{lateV4, lateV6} {
		assert.Equal(t, "late", got[a].Source.PodName, a)
		assert.Equal(t, "node-a", got[a].Source.NodeName, a)
		assert.NotEmpty(t, got[a].ClusterUID, a)
	}
	assert.NotContains(t, got, never, "still held")
	require.Eventually(t, func() bool { return len(h.exported(t)) == 3 }, 2*DefaultHoldUnresolved, 50*time.Millisecond, "the hold gives up")
	assert.Empty(t, h.exported(t)[never].Source.PodName)
	assert.Equal(t, flowrecord.EndpointPod, h.exported(t)[never].Source.Kind)
	assert.Equal(t, map[string]int64{"resolved": 2, "expired": 1}, h.held(t))
	assert.Equal(t, map[string]int64{reasonUnknownPod: 1}, metricValues(t, h.tt, "otelcol_processor_k8s_flow_addresses_unresolved"))
	t.Logf("late Pod named %v after the connection started (status written after 1.5 s); unresolved exported after %v",
		named.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func createPod(t *testing.T, c kubernetes.Interface, name, node string, ips ...string) {
	t.Helper()
	ctx := context.Background()
	in := testPod("default", name, "", node, time.Time{}, nil, ips...)
	status := in.Status
	in.Status = corev1.PodStatus{}
	created, err := c.CoreV1().Pods("default").Create(ctx, in, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Status = status
	_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func readClusterRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "clusterrole.yaml"))
	require.NoError(t, err)
	defer f.Close()
	var role rbacv1.ClusterRole
	require.NoError(t, utilyaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&role))
	return &role
}

// clusterWithRole skips under -short, starts the real kube-apiserver with
// the README's ClusterRole and a ServiceAccount granted it, and creates the
// test cluster's Nodes.
func clusterWithRole(t *testing.T) (cp *controlplane.ControlPlane, granted string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the real kube-apiserver test needs the control-plane binaries (testbed/controlplane/build.sh)")
	}
	cp, granted = startWithRole(t)
	createNodes(t, cp.Admin)
	return cp, granted
}

// startWithRole starts the real kube-apiserver with the README's ClusterRole
// created, and a ServiceAccount granted it.
func startWithRole(t *testing.T) (cp *controlplane.ControlPlane, granted string) {
	t.Helper()
	cp = controlplane.Start(t)
	role := readClusterRole(t)
	_, err := cp.Admin.RbacV1().ClusterRoles().Create(context.Background(), role, metav1.CreateOptions{})
	require.NoError(t, err)
	return cp, cp.ServiceAccount(t, "flowtel", "node-collector", role.Name)
}
