//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/testbed/cluster"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// TestIdentity: records name the cluster without configuration, and names
// are time-aware end to end. web-b's IP is reused by a new Pod, web-b2,
// while a connection to it is open: the old connection keeps web-b's name,
// a new one gets web-b2's.
//
// node-1 names web-b from the web-remote EndpointSlices (it watches only its
// own Pods). node-2's collector is stopped first, so every record of these
// connections is node-1's half, exported unpaired: what it says about the
// destination is what node-1's EndpointSlice index says, whatever the order
// in which halves would reach the gateway. The node collectors' active
// timeout is long, so both connections are first classified after the IP
// was reused.
func TestIdentity(t *testing.T) {
	b := startBed(t, options{gateways: 1, poll: time.Second, active: 10 * time.Second, idle: 10 * time.Second})
	ctx := context.Background()
	require.NoError(t, b.nodes[1].Stop())

	oldConn := Case{Name: "connection open before the IP was reused", From: "pod:client-a", To: "service:web-remote", Proto: "tcp", Sport: 44001,
		Expect: Expect{FlowType: 2, SourcePod: "client-a", DestinationPod: "web-b", DestinationNode: "node-2",
			ServicePortName: "default/web-remote:http", CorrelationState: "unpaired"}}
	newConn := oldConn
	newConn.Name, newConn.Sport, newConn.Expect.DestinationPod = "connection opened after", 44002, "web-b2"

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ns, _, to := b.endpoints(oldConn)
		out, err := netlab.Exec(ctx, ns, b.peer, "send", "-proto", "tcp", "-to", to.String(),
			"-bytes", fmt.Sprint(requestBytes), "-sport", fmt.Sprint(oldConn.Sport), "-hold", "6s")
		assert.NoError(t, err, "%s: %s", oldConn.Name, out)
	}()
	time.Sleep(time.Second) // the connection is open (and in node-1's conntrack)
	b.reuseIP(t, "web-b", "web-b2", "web-remote")
	time.Sleep(time.Second) // node-1's informers see the change
	b.run(t, newConn)
	wg.Wait()

	b.check(t, []Case{oldConn, newConn}, 90*time.Second)
	b.checkEveryRow(t, oldConn, "web-b")
	b.checkEveryRow(t, newConn, "web-b2")

	// ClickHouse clusterUUID is the cluster's id, the kube-system Namespace's
	// UID, although no exporter was given one.
	kubeSystem, err := b.cp.Admin.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{string(kubeSystem.UID)}, b.clusterUUIDs(t))
}

// reuseIP gives the netlab Pod of the Kubernetes Pod old to a new Pod
// object (same IPs), as after old's deletion and a new Pod's scheduling,
// and points service's EndpointSlices at it, as the EndpointSlice controller would.
func (b *bed) reuseIP(t *testing.T, old, name, service string) {
	t.Helper()
	ctx := context.Background()
	admin := b.cp.Admin
	zero := int64(0)
	require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, old, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	reused := *b.pods[old]
	reused.Name = name
	require.NoError(t, cluster.RegisterPod(ctx, admin, &reused, map[string]string{"app": name}))
	slices, err := admin.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + service})
	require.NoError(t, err)
	require.NotEmpty(t, slices.Items)
	for i := range slices.Items {
		s := &slices.Items[i]
		for j := range s.Endpoints {
			if ref := s.Endpoints[j].TargetRef; ref != nil && ref.Name == old {
				ref.Name, ref.UID = name, ""
			}
		}
		_, err := admin.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// checkEveryRow: no ClickHouse row of the case names another destination Pod.
func (b *bed) checkEveryRow(t *testing.T, c Case, pod string) {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	rows, err := readRows(conn, c)
	require.NoError(t, err)
	require.NotEmpty(t, rows, c.Name)
	var names []string
	for _, r := range rows {
		names = append(names, r.DestinationPod)
	}
	assert.Equal(t, strings.Repeat(pod+" ", len(rows)), strings.Join(names, " ")+" ", "%s: destination Pod of every row", c.Name)
}

// clusterUUIDs lists the distinct clusterUUID values in the flows table.
func (b *bed) clusterUUIDs(t *testing.T) []string {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	rows, err := conn.Query(context.Background(), `SELECT DISTINCT clusterUUID FROM flowtel_e2e.flows ORDER BY clusterUUID`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}
