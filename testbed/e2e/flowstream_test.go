//go:build integration

package e2e

import (
	"bufio"
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/testbed/collector"
)

// The flow stream end to end: the gateways export over OTLP to a fan-in
// collector (the built gateway distribution) running flow_stream, and
// `flowctl observe -f` (the built binary) as a ServiceAccount that may
// observe the default Namespace sees its flows live, its Node and external
// peers marked redacted; a user of another Namespace sees none of them.
func TestFlowStreamObserve(t *testing.T) {
	flowctl, err := filepath.Abs(filepath.Join(repoRoot, "_build", "flowctl", "flowctl"))
	require.NoError(t, err)
	_, err = os.Stat(flowctl)
	require.NoError(t, err, "build flowctl with make build")
	fanInOTLP := freePort(t)
	b := startBed(t, options{gateways: 1, otlpTo: fmt.Sprintf("127.0.0.1:%d", fanInOTLP)})
	cp := b.cp
	cp.ApplyClusterRoles(t, filepath.Join(repoRoot, "deploy", "kubernetes", "components", "flow-stream", "clusterroles.yaml"))

	gatewayBin, err := collector.Binary(repoRoot, "flowtel-gateway")
	require.NoError(t, err)
	certFile, keyFile := cp.ServingCertificate(t)
	streamPort := freePort(t)
	startCollector(t, context.Background(), collector.Options{Name: "flowstream", Binary: gatewayBin, Dir: t.TempDir(), Config: fmt.Sprintf(`
extensions:
  health_check: {endpoint: "127.0.0.1:HEALTH_PORT"}
receivers:
  otlp: {protocols: {grpc: {endpoint: "127.0.0.1:%d"}}}
exporters:
  flow_stream:
    endpoint: 127.0.0.1:%d
    tls: {cert_file: %s, key_file: %s}
    kubernetes: {auth_type: kubeConfig, kubeconfig: %s}
service:
  extensions: [health_check]
  pipelines:
    logs: {receivers: [otlp], exporters: [flow_stream]}
`+telemetry, fanInOTLP, streamPort, certFile, keyFile, cp.DelegatingServiceAccount(t, "flowtel", "flowstream", true))})

	user := func(ns, name string) string {
		tok := cp.ServiceAccount(t, ns, name)
		_, err := cp.Admin.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "flows-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "antrea-flow-viewer"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return cp.Kubeconfig(t, name, tok)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cp.ClientCA.Raw}), 0o600))
	server := fmt.Sprintf("127.0.0.1:%d", streamPort)
	observe := func(ctx context.Context, kubeconfig string, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, flowctl, append([]string{"observe", "--kubeconfig", kubeconfig, "--stream-server", server, "--ca-file", ca}, args...)...)
	}

	dev := user("default", "dev")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := observe(ctx, dev, "-n", "default", "-f", "-o", "jsonl")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()

	cases := map[uint16]Case{}
	for _, c := range Cases() {
		switch c.Name {
		case "inter-Node Pod to Pod", "Antrea issue #8260: Node to remote Pod", "to external":
			cases[c.Sport] = c
		}
	}
	require.Len(t, cases, 3)
	for _, c := range cases {
		b.run(t, c)
	}
	seen := map[uint16]*pb.Flow{}
	lines := bufio.NewScanner(stdout)
	for len(seen) < len(cases) && lines.Scan() {
		f := &pb.Flow{}
		require.NoError(t, protojson.Unmarshal(lines.Bytes(), f), lines.Text())
		k := f.GetK8S()
		assert.True(t, k.GetSourcePodNamespace() == "default" || k.GetDestinationPodNamespace() == "default", "a flow of another Namespace: %s", lines.Text())
		if _, ok := cases[uint16(f.GetTransport().GetSourcePort())]; ok {
			seen[uint16(f.GetTransport().GetSourcePort())] = f
		}
	}
	require.Len(t, seen, len(cases), "flowctl saw %d of the cases live; stderr: %s", len(seen), stderr.String())
	for sport, f := range seen {
		k := f.K8S
		switch cases[sport].Name {
		case "inter-Node Pod to Pod":
			assert.Zero(t, k.SourceDisclosure)
			assert.Zero(t, k.DestinationDisclosure)
			assert.Equal(t, "client-a", k.SourcePodName)
			assert.Equal(t, "web-b", k.DestinationPodName)
			assert.NotEmpty(t, k.DestinationNodeName, "both endpoints in the stream's Namespace: in full")
		case "Antrea issue #8260: Node to remote Pod":
			assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, k.SourceDisclosure, "a Node endpoint is marked redacted")
			assert.Empty(t, k.SourceNodeName)
			assert.Equal(t, "web-b", k.DestinationPodName)
		case "to external":
			assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, k.DestinationDisclosure)
			assert.Nil(t, f.Ipfix)
		}
	}

	// Another Namespace's user: none of these flows, and no access to default's.
	other := user("other", "tenant")
	out, err := observe(context.Background(), other, "-n", "other", "-o", "jsonl").Output()
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(string(out)))
	out, err = observe(context.Background(), other, "-n", "default").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "permission denied")
}
