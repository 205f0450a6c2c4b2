package k8sflowprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Both halves of one connection must carry the same key (D3), so that the
// gateway can pair them.
func TestIssue8260HalvesShareTheKey(t *testing.T) {
	procs := nodeProcessors(t)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			enrich := func(c flowCase) *flowrecord.Record {
				r := c.record()
				reason, _ := procs[c.reporter].enrich(r)
				require.Empty(t, reason)
				return r
			}
			seed := issue8260Cases(f)
			srcHalf, dstHalf := enrich(seed[1]), enrich(seed[2])
			assert.Equal(t, "6|"+hp(f.gwB, 37148)+"|"+hp(f.webA, 80), srcHalf.Key)
			assert.Equal(t, srcHalf.Key, dstHalf.Key)
			assert.Equal(t, flowrecord.KeyHash(srcHalf.Key), flowrecord.KeyHash(dstHalf.Key))

			// From-external through a remote ingress Node: the ingress half is
			// keyed by its SNAT address and port, the destination half sees them.
			more := moreCases(f)
			ingress, dest := enrich(more[1]), enrich(more[2])
			assert.Equal(t, dest.Key, ingress.Key)
			assert.Equal(t, "6|"+hp(f.gwB, 61000)+"|"+hp(f.webA, 80), ingress.Key)
		})
	}
}

func TestServiceNames(t *testing.T) {
	procs := nodeProcessors(t)
	a := procs["node-a"]
	cases := []struct {
		name, origDst string
		proto         uint8
		want          string
	}{
		{"named port on ClusterIP", hp(v4.clusterIP, 80), 6, "default/web:http"},
		{"named port on IPv6 ClusterIP", hp(v6.clusterIP, 80), 6, "default/web:http"},
		{"unnamed port: namespace/name only", hp("10.96.5.5", 5432), 6, "default/db"},
		{"UDP and TCP ports of one Service are told apart (UDP)", hp("10.96.0.10", 53), 17, "kube-system/kube-dns:dns"},
		{"UDP and TCP ports of one Service are told apart (TCP)", hp("10.96.0.10", 53), 6, "kube-system/kube-dns:dns-tcp"},
		{"NodePort on the local Node's InternalIP", hp(v4.nodeA, 30080), 6, "default/web:http"},
		{"NodePort on a remote Node's IPv6 InternalIP", hp(v6.nodeB, 30080), 6, "default/web:http"},
		{"NodePort on the local gateway address", hp(v4.gwA, 30080), 6, "default/web:http"},
		{"LoadBalancer ingress IP", hp("203.0.113.10", 80), 6, "default/web:http"},
		{"externalIP", hp("198.51.100.7", 80), 6, "default/web:http"},
		{"wrong port on a ClusterIP", hp(v4.clusterIP, 81), 6, ""},
		{"wrong protocol on a ClusterIP", hp(v4.clusterIP, 80), 17, ""},
		{"NodePort number on an external address", hp("198.51.100.8", 30080), 6, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := flowCase{reporter: "node-a", src: hp(v4.client, 40000), dst: hp(v4.webA, 80), origDst: c.origDst, proto: c.proto}.record()
			if r.OriginalDestinationAddress.Is6() {
				r.Source.Address, r.Destination.Address = addr(v6.client), addr(v6.webA)
			}
			reason, _ := a.enrich(r)
			require.Empty(t, reason)
			assert.Equal(t, c.want, r.Service.PortName)
		})
	}
}

// IP reuse (D7): a Job Pod completes, a new Pod takes its IP. Connections
// that started while the Job Pod ran stay the Job Pod's; new ones are the new
// Pod's; after the retention the old Pod is gone.
func TestIPReuse(t *testing.T) {
	clock := newFakeClock(t0)
	const ip = "10.244.1.9"
	objs := append(clusterObjects(), cronJob("backup-29000", "backup"),
		testPod("default", "backup-29000-x", "uid-job-pod", "node-a", t0, &metav1.OwnerReference{Kind: "Job", Name: "backup-29000", Controller: ptr(true)}, ip))
	p, cs := startProcessor(t, nodeConfig("node-a"), clock, objs...)

	conn := func(start time.Time) *flowrecord.Record {
		r := flowCase{reporter: "node-a", src: hp(ip, 40000), dst: hp(v4.external, 443)}.record()
		r.Start = start
		reason, _ := p.enrich(r)
		require.Empty(t, reason)
		return r
	}
	old := conn(t0.Add(time.Minute))
	require.Equal(t, "backup-29000-x", old.Source.PodName)
	assert.Equal(t, "CronJob", old.Source.WorkloadKind)
	assert.Equal(t, "backup", old.Source.WorkloadName)

	// The Job Pod completes at t0+2m: its IP is free.
	ended := t0.Add(2 * time.Minute)
	clock.set(t0.Add(3 * time.Minute))
	jobPod, err := cs.CoreV1().Pods("default").Get(context.Background(), "backup-29000-x", metav1.GetOptions{})
	require.NoError(t, err)
	jobPod.Status.Phase = corev1.PodSucceeded
	jobPod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(ended)}}}}
	_, err = cs.CoreV1().Pods("default").UpdateStatus(context.Background(), jobPod, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "terminated Pod stops owning its IP", func() bool {
		return conn(t0.Add(150*time.Second)).Source.PodName == ""
	})
	assert.Equal(t, "backup-29000-x", conn(t0.Add(time.Minute)).Source.PodName, "a connection from before the end is still the Job Pod's")

	// A new Pod takes the IP at t0+4m.
	clock.set(t0.Add(4 * time.Minute))
	_, err = cs.CoreV1().Pods("default").Create(context.Background(),
		testPod("default", "web-new", "uid-web-new", "node-a", t0.Add(4*time.Minute), nil, ip), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, "new Pod owns the IP", func() bool { return conn(t0.Add(5*time.Minute)).Source.PodName == "web-new" })
	assert.Equal(t, "backup-29000-x", conn(t0.Add(time.Minute)).Source.PodName, "old connections resolve to the old Pod")
	assert.Equal(t, "", conn(t0.Add(3*time.Minute)).Source.PodName, "between the two Pods nobody owned the IP")
	assert.Equal(t, flowrecord.EndpointPod, conn(t0.Add(3*time.Minute)).Source.Kind, "still inside node-a's podCIDR")

	// Past the 5-minute retention the Job Pod is forgotten.
	clock.set(ended.Add(5*time.Minute + time.Second))
	p.ix.Purge()
	assert.Equal(t, "", conn(t0.Add(time.Minute)).Source.PodName)
	assert.Equal(t, "web-new", conn(t0.Add(6*time.Minute)).Source.PodName)
}

// A deleted Pod names connections that started before its deletion for the
// retention period; updates (labels, IPs) are reflected.
func TestPodUpdatesAndDeletion(t *testing.T) {
	clock := newFakeClock(t0.Add(time.Minute))
	cfg := nodeConfig("node-a")
	cfg.PodLabels = true
	p, cs := startProcessor(t, cfg, clock, clusterObjects()...)
	ctx := context.Background()
	lookup := func(ip string, start time.Time) flowrecord.Endpoint {
		r := flowCase{reporter: "node-a", src: hp(ip, 40000), dst: hp(v4.external, 443)}.record()
		r.Start = start
		reason, _ := p.enrich(r)
		require.Empty(t, reason)
		return r.Source
	}
	web := lookup(v4.webA, t0.Add(time.Minute))
	assert.Equal(t, map[string]string{"app": "web-a"}, web.PodLabels)
	assert.Equal(t, "Deployment", web.WorkloadKind)
	assert.Equal(t, "web", web.WorkloadName)
	assert.Equal(t, "uid-web-a", web.PodUID)
	assert.Equal(t, "uid-node-a", web.NodeUID)
	assert.Equal(t, "default", web.Namespace)

	pod, err := cs.CoreV1().Pods("default").Get(ctx, "web-a", metav1.GetOptions{})
	require.NoError(t, err)
	pod.Labels["tier"] = "front"
	_, err = cs.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "label update", func() bool { return lookup(v4.webA, t0.Add(time.Minute)).PodLabels["tier"] == "front" })

	clock.set(t0.Add(2 * time.Minute))
	require.NoError(t, cs.CoreV1().Pods("default").Delete(ctx, "web-a", metav1.DeleteOptions{}))
	eventually(t, "deleted Pod no longer owns new connections", func() bool {
		return lookup(v4.webA, t0.Add(3*time.Minute)).PodName == ""
	})
	assert.Equal(t, "web-a", lookup(v4.webA, t0.Add(time.Minute)).PodName, "kept for connections that started before")
	clock.set(t0.Add(8 * time.Minute))
	p.ix.Purge()
	assert.Equal(t, "", lookup(v4.webA, t0.Add(time.Minute)).PodName, "gone after the retention")

	// Node and Service deletions are reflected.
	require.NoError(t, cs.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}))
	require.NoError(t, cs.CoreV1().Nodes().Delete(ctx, "node-b", metav1.DeleteOptions{}))
	eventually(t, "Service and Node deletion", func() bool {
		r := flowCase{reporter: "node-a", src: hp(v4.client, 40000), origDst: hp(v4.clusterIP, 80), dst: hp(v4.gwB, 80)}.record()
		reason, _ := p.enrich(r)
		return reason == "" && r.Service.PortName == "" && r.Destination.Kind == flowrecord.EndpointExternal
	})
}

// hostNetwork Pods never own an IP; a running Pod that owns a Node's
// gateway address wins over the Node rule (D1); Pods of other Nodes are not
// indexed with pods: local, but are with pods: all.
func TestOwnershipRules(t *testing.T) {
	clock := newFakeClock(t0.Add(time.Minute))
	squatter := testPod("default", "gw-pod", "uid-gw-pod", "node-a", t0, nil, v4.gwA)
	objs := append(clusterObjects(), squatter)

	local, _ := startProcessor(t, nodeConfig("node-a"), clock, objs...)
	r := flowCase{reporter: "node-a", src: hp(v4.nodeA, 40000), dst: hp(v4.gwA, 80)}.record()
	require.Empty(t, first(local.enrich(r)))
	assert.Equal(t, ep{flowrecord.EndpointNode, "", "node-a"}, ep{r.Source.Kind, r.Source.PodName, r.Source.NodeName}, "hostNetwork Pod does not own the Node IP")
	assert.Equal(t, ep{flowrecord.EndpointPod, "gw-pod", "node-a"}, ep{r.Destination.Kind, r.Destination.PodName, r.Destination.NodeName}, "a running Pod wins")

	r = flowCase{reporter: "node-a", src: hp(v4.client, 40000), dst: hp(v6.webA, 80)}.record()
	r.Source.Address = addr(v6.client)
	r.Destination.Address = addr(v6.webA)
	r.Destination.Address = addr("fd00:10:244:2::99")
	var unresolved int
	_, unresolved = local.enrich(r)
	assert.Equal(t, 1, unresolved, "a remote podCIDR address without a known Pod is counted")
	assert.Equal(t, ep{flowrecord.EndpointPod, "", "node-b"}, ep{r.Destination.Kind, r.Destination.PodName, r.Destination.NodeName})

	all := nodeConfig("node-a")
	all.Pods = PodsAll
	gw, _ := startProcessor(t, all, clock, objs...)
	r = flowCase{reporter: "node-a", src: hp(v4.client, 40000), dst: hp(v4.dbB, 80)}.record()
	require.Empty(t, first(gw.enrich(r)))
	assert.Equal(t, "uid-db-b", r.Destination.PodUID, "pods: all indexes remote Pods")
	assert.Equal(t, "StatefulSet", r.Destination.WorkloadKind)
	assert.Nil(t, r.Destination.PodLabels, "labels only with pod_labels")
	assert.Equal(t, 4, gw.ix.Sizes().Pods, "hostNetwork Pod not indexed")
	assert.Equal(t, 3, local.ix.Sizes().Pods, "only node-a's Pods with pods: local")
}

func first[A, B any](a A, _ B) A { return a }

var _ runtime.Object = (*corev1.Pod)(nil)
