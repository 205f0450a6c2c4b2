//go:build integration

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/testbed/cluster"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// TestLateIdentity: a Pod whose IPs reach the API after its first
// connections started is still named at every sink. client-a's Pod object is
// recreated without IPs (as the API holds a new Pod before the kubelet's
// first status update); its connections to web-b start, and only 2.5 s later
// are its IPv4 and IPv6 addresses written to its status. node-1's k8s_flow
// holds the records it cannot name yet and names them once the IPs arrive.
func TestLateIdentity(t *testing.T) {
	// Active timeout 1 s: node-1 exports its first records of the connections
	// before their Pod has IPs.
	b := startBed(t, options{gateways: 1, poll: time.Second, active: time.Second, idle: 2 * time.Second})
	ctx := context.Background()
	admin := b.cp.Admin
	zero := int64(0)
	pod := b.pods["client-a"]
	require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	require.NoError(t, cluster.CreatePod(ctx, admin, pod, map[string]string{"app": pod.Name}))
	time.Sleep(time.Second) // node-1's informers see the Pod without IPs

	var cases []Case
	for _, v6 := range []bool{false, true} {
		c := Case{Name: fmt.Sprintf("Pod named after its connection started (IPv6 %v)", v6), From: "pod:client-a", To: "pod:web-b",
			Proto: "tcp", IPv6: v6, Sport: 44101,
			Expect: Expect{FlowType: 2, SourcePod: "client-a", SourceNode: "node-1", DestinationPod: "web-b", DestinationNode: "node-2",
				CorrelationState: "paired"}}
		if v6 {
			c.Sport = 44102
		}
		cases = append(cases, c)
	}
	// The IPs must arrive after node-1's k8s_flow saw the connections'
	// first records (a fixed sleep raced a slow process start under CI
	// load: the first records came after the IPs and needed no hold).
	received := func() float64 {
		m, err := b.nodes[0].Metrics("otelcol_processor_k8s_flow_records_received")
		require.NoError(t, err)
		return sumSamples(m, "")
	}
	before := received()
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns, _, to := b.endpoints(c)
			out, err := netlab.Exec(ctx, ns, b.peer, "send", "-proto", c.Proto, "-to", to.String(),
				"-bytes", fmt.Sprint(requestBytes), "-sport", fmt.Sprint(c.Sport), "-hold", "8s")
			assert.NoError(t, err, "%s: %s", c.Name, out)
		}()
	}
	// At least 2.5 s after the start and both connections' first records in
	// (within hold_unresolved, 5 s, of the first held one).
	sent := time.Now()
	require.Eventually(t, func() bool { return received() >= before+float64(len(cases)) }, 5*time.Second, 100*time.Millisecond,
		"node-1's k8s_flow received no record of the connections in 5 s")
	time.Sleep(time.Until(sent.Add(2500 * time.Millisecond)))
	require.NoError(t, cluster.SetPodIPs(ctx, admin, pod))
	wg.Wait()

	b.check(t, cases, 90*time.Second)
	b.checkSinks(t, cases, 30*time.Second)
	held, err := b.nodes[0].Metrics("otelcol_processor_k8s_flow_records_held")
	require.NoError(t, err)
	assert.Positive(t, sumSamples(held, `outcome="resolved"`), "node-1 named no record late: %v", held)
}
