//go:build integration

package distributions

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
	"github.com/flowtel/flowtel/testbed/ports"
)

// userManifest is what docs/distributions.md tells a platform team to write:
// its own collector, contrib components flowtel does not ship (transform,
// resource), and flowtel's components resolved from a checkout by a replaces
// line, since the module is not published.
const userManifest = `dist:
  module: example.com/platform-collector
  name: platform-collector
  output_path: %[1]s/out
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v0.161.0
  - gomod: github.com/flowtel/flowtel v0.0.0
    import: github.com/flowtel/flowtel/receiver/conntrackreceiver
processors:
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/processor/resourceprocessor v0.161.0
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/processor/transformprocessor v0.161.0
  - gomod: github.com/flowtel/flowtel v0.0.0
    import: github.com/flowtel/flowtel/processor/k8sflowprocessor
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter v0.161.0
  - gomod: github.com/flowtel/flowtel v0.0.0
    import: github.com/flowtel/flowtel/exporter/ipfixexporter
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider v1.67.0
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider v1.67.0
replaces:
  - github.com/flowtel/flowtel => %[2]s
`

// TestUserManifest builds a user's own OCB manifest outside the repository
// with the pinned OCB and runs it: a flow record sent over OTLP goes through
// contrib's transform processor (which renames the source Pod) and leaves
// through flowtel's ipfix exporter as Antrea's JSON record, renamed.
func TestUserManifest(t *testing.T) {
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	manifestPath := filepath.Join(dir, "manifest.yaml")
	require.NoError(t, os.WriteFile(manifestPath, []byte(fmt.Sprintf(userManifest, dir, repo)), 0o644))

	t.Log("building a user manifest with the pinned OCB (first time: a few minutes)")
	var out []byte
	for attempt := range 3 { // the module proxy's checksum look-ups fail transiently
		cmd := exec.Command("go", "tool", "-modfile=internal/tools/go.mod", "go.opentelemetry.io/collector/cmd/builder", "--config", manifestPath)
		cmd.Dir = repo
		if out, err = cmd.CombinedOutput(); err == nil {
			break
		}
		t.Logf("build attempt %d failed: %v", attempt+1, err)
	}
	require.NoError(t, err, "%s", out)
	binary := filepath.Join(dir, "out", "platform-collector")

	components, err := exec.Command(binary, "components").CombinedOutput()
	require.NoError(t, err, "%s", components)
	for _, name := range []string{"conntrack", "k8s_flow", "ipfix", "transform", "resource"} {
		require.Contains(t, string(components), "- name: "+name+"\n")
	}

	sink, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	otlpPort, err := ports.Free()
	require.NoError(t, err)
	config := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
receivers:
  otlp: {protocols: {grpc: {endpoint: "127.0.0.1:%d"}}}
processors:
  resource: {attributes: [{key: platform.team, value: net, action: upsert}]}
  transform: {log_statements: [{context: log, statements: ['set(attributes["source.k8s.pod.name"], "renamed-by-transform")']}]}
exporters:
  ipfix: {endpoint: "%s", format: json}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    logs: {receivers: [otlp], processors: [resource, transform], exporters: [ipfix]}
`, otlpPort, sink.Addr())), 0o644))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := exec.CommandContext(ctx, binary, "--config", config)
	var logs strings.Builder
	run.Stdout, run.Stderr = &logs, &logs
	require.NoError(t, run.Start())
	defer func() { cancel(); _ = run.Wait() }()

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", otlpPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ld := plog.NewLogs()
	attrcodec.Encode(flowrecordtest.Full(false), ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
	require.Eventually(t, func() bool {
		_, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(ld))
		return err == nil
	}, 30*time.Second, 200*time.Millisecond, "the collector never accepted OTLP: %s", &logs)

	require.NoError(t, sink.(*net.TCPListener).SetDeadline(time.Now().Add(30*time.Second)))
	c, err := sink.Accept()
	require.NoError(t, err, "the ipfix exporter never connected: %s", &logs)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err, "%s", &logs)
	require.Contains(t, line, `"sourcePodName":"renamed-by-transform"`)
	require.Contains(t, line, `"destinationPodName":"api-0"`)
}
