//go:build integration

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/testbed/collector"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// The shipped configurations with the bed's overlays pass the built
// distributions' own `validate`, for every shape of bed the tests start: a
// mistake in an overlay shows here in a second, not as a bed that never
// becomes ready.
func TestOverlaysValidate(t *testing.T) {
	nodeBin, err := collector.Binary(repoRoot, "flowtel-node")
	require.NoError(t, err)
	gatewayBin, err := collector.Binary(repoRoot, "flowtel-gateway")
	require.NoError(t, err)
	dir := t.TempDir()
	validate := func(o collector.Options) {
		t.Helper()
		overlay := filepath.Join(dir, o.Name+".yaml")
		cfg := strings.NewReplacer("HEALTH_PORT", "13133", "METRICS_PORT", "8888").Replace(o.Config)
		require.NoError(t, os.WriteFile(overlay, []byte(cfg), 0o600))
		args := []string{"validate"}
		for _, c := range append(o.Configs, overlay) {
			args = append(args, "--config", c)
		}
		cmd := exec.Command(o.Binary, args...)
		cmd.Env = append(os.Environ(), o.Env...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s\n%s", o.Name, out, cfg)
	}
	node := &netlab.Node{Name: "node-1", NS: "flowtel-validate"}
	gateways := []string{"127.0.0.1:14317", "127.0.0.1:14318"}
	for i, opt := range []options{
		{gateways: 1},
		{gateways: 1, nodeStorage: true, nodeTap: "127.0.0.1:4317"},
		{gateways: 1, conntrackExtra: ", events: false"},
		{gateways: 1, antreaAgents: true, agentEndpoint: "127.0.0.1:14739"},
	} {
		o := nodeCollector(t, node, nodeBin, "/nonexistent/kubeconfig", gateways, opt, dir)
		o.Name += "-" + string(rune('a'+i))
		validate(o)
	}
	validate(gatewayCollector(t, "gateway-all", gatewayBin, dir, 14317, gatewaySinks{clickhouse: "tcp://127.0.0.1:9000", ipfix: "127.0.0.1:4739", otlp: "127.0.0.1:4318"}))
	validate(gatewayCollector(t, "gateway-ch", gatewayBin, dir, 14317, gatewaySinks{clickhouse: "tcp://127.0.0.1:9000"}))
	validate(gatewayCollector(t, "gateway-antrea", gatewayBin, dir, 14317, gatewaySinks{clickhouse: "tcp://127.0.0.1:9000", antreaIPFIX: "127.0.0.1:14739"}))
	validate(antreaLoadGateway(t, gatewayBin, dir, bedCerts(t, dir), 14739, 14740, "127.0.0.1:4739"))
}
