//go:build integration

package k8sflowprocessor

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

// clusterUIDOf runs one record through p and returns the k8s.cluster.uid of
// the resource it comes out under ("" when absent).
func clusterUIDOf(t *testing.T, p *k8sFlowProcessor) string {
	t.Helper()
	ld := plog.NewLogs()
	r := flowCase{reporter: "node-a", src: hp(v4.gwA, 40000), dst: hp(v4.external, 443)}.record() // node-a → external
	attrcodec.Encode(r, ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
	out, err := p.processLogs(context.Background(), ld)
	require.NoError(t, err)
	require.Equal(t, 1, out.LogRecordCount())
	v, ok := out.ResourceLogs().At(0).Resource().Attributes().Get(catalogue.ResourceClusterUID)
	if !ok {
		return ""
	}
	return v.Str()
}

// Records name their cluster without configuration: k8s_flow reads the
// kube-system Namespace's UID once, from a real kube-apiserver, with the
// documented ClusterRole; cluster_uid overrides it; without the grant, Start
// says which one is missing.
func TestClusterUIDFromKubeAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real kube-apiserver test needs the control-plane binaries (testbed/controlplane/build.sh)")
	}
	cp := controlplane.Start(t)
	ctx := context.Background()
	kubeSystem, err := cp.Admin.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, kubeSystem.UID)

	_, err = cp.Admin.CoreV1().Nodes().Create(ctx, testNode("node-a", "", nil, "10.244.1.0/24"), metav1.CreateOptions{})
	require.NoError(t, err)

	role := readClusterRole(t)
	_, err = cp.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	// The same role without the Namespace grants (the kube-system get, and
	// network_policies' list/watch: those runs set network_policies: false).
	noNamespace := role.DeepCopy()
	noNamespace.Name = "flowtel-k8s-flow-no-namespace"
	noNamespace.Rules = slices.DeleteFunc(noNamespace.Rules, func(r rbacv1.PolicyRule) bool { return slices.Equal(r.Resources, []string{"namespaces"}) })
	require.Len(t, noNamespace.Rules, len(role.Rules)-2, "the documented role has two Namespace grants")
	_, err = cp.Admin.RbacV1().ClusterRoles().Create(ctx, noNamespace, metav1.CreateOptions{})
	require.NoError(t, err)

	run := func(t *testing.T, token string, mutate func(*Config)) (*k8sFlowProcessor, error) {
		cfg := nodeConfig("node-a")
		cfg.AuthType, cfg.KubeConfig, cfg.WaitForSyncTimeout = "kubeConfig", cp.Kubeconfig(t, "sa", token), 10*time.Second
		mutate(cfg)
		p, err := newProcessor(processortestSettings(), cfg, newClient, time.Now)
		require.NoError(t, err)
		err = p.start(ctx, nil)
		t.Cleanup(func() { require.NoError(t, p.shutdown(ctx)) })
		return p, err
	}
	granted := cp.ServiceAccount(t, "flowtel", "node-collector", role.Name)
	t.Run("kube-system UID by default", func(t *testing.T) {
		p, err := run(t, granted, func(*Config) {})
		require.NoError(t, err)
		assert.Equal(t, string(kubeSystem.UID), clusterUIDOf(t, p))
	})
	t.Run("configured cluster_uid", func(t *testing.T) {
		p, err := run(t, granted, func(c *Config) { c.ClusterUID = "prod-eu-1" })
		require.NoError(t, err)
		assert.Equal(t, "prod-eu-1", clusterUIDOf(t, p))
	})

	noPolicies := func(c *Config) { c.NetworkPolicies = false }
	withoutGrant := cp.ServiceAccount(t, "flowtel", "no-namespace", noNamespace.Name)
	t.Run("without the grant Start fails naming it", func(t *testing.T) {
		_, err := run(t, withoutGrant, noPolicies)
		require.Error(t, err)
		t.Logf("start without get on namespaces: %v", err)
		assert.Contains(t, err.Error(), "get namespaces: forbidden by RBAC")
		assert.Contains(t, err.Error(), "grant get on it in the ClusterRole")
		assert.Contains(t, err.Error(), "or set cluster_uid")
	})
	t.Run("without the grant and wait_for_sync false, records carry none", func(t *testing.T) {
		p, err := run(t, withoutGrant, func(c *Config) { noPolicies(c); c.WaitForSync = false })
		require.NoError(t, err)
		// Records are shed (counted not_synced) until every cache is filled,
		// not only the Nodes': wait for all of them, as a busy machine may not.
		require.Eventually(t, func() bool { return p.ix.Sizes().Nodes == 1 && p.informers.HasSynced() }, 10*time.Second, 10*time.Millisecond)
		assert.Equal(t, "", clusterUIDOf(t, p))
	})
	t.Run("configured cluster_uid needs no grant", func(t *testing.T) {
		p, err := run(t, withoutGrant, func(c *Config) { noPolicies(c); c.ClusterUID = "prod-eu-1" })
		require.NoError(t, err)
		assert.Equal(t, "prod-eu-1", clusterUIDOf(t, p))
	})
}
