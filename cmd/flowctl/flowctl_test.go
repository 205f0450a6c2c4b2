//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/exporter/flowstreamexporter"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	cp   *controlplane.ControlPlane
	cfg  component.Config
	exp  exporter.Logs
	addr string
	// ca verifies the exporter's serving certificate (for 127.0.0.1):
	// flowctl sends no credential to a server it did not verify.
	ca string
}

// startEnv runs a real API server and a flow_stream exporter, built from its
// factory as a collector would.
func startEnv(t *testing.T) *env { return startEnvWith(t, nil) }

// startEnvWith is startEnv with more of the exporter's settings.
func startEnvWith(t *testing.T, settings map[string]any) *env {
	t.Helper()
	cp := controlplane.Start(t)
	cp.ApplyClusterRoles(t, filepath.Join("..", "..", "deploy", "kubernetes", "components", "flow-stream", "clusterroles.yaml"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	certFile, keyFile := cp.ServingCertificate(t)
	f := flowstreamexporter.NewFactory()
	cfg := f.CreateDefaultConfig()
	m := map[string]any{
		"endpoint":   addr,
		"tls":        map[string]any{"cert_file": certFile, "key_file": keyFile},
		"kubernetes": map[string]any{"auth_type": "kubeConfig", "kubeconfig": cp.DelegatingServiceAccount(t, "flowtel", "gateway", true)},
	}
	maps.Copy(m, settings)
	require.NoError(t, confmap.NewFromStringMap(m).Unmarshal(cfg))
	ca := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cp.ClientCA.Raw}), 0o600))
	e := &env{cp: cp, cfg: cfg, addr: addr, ca: ca}
	e.start(t)
	return e
}

func (e *env) start(t *testing.T) {
	t.Helper()
	f := flowstreamexporter.NewFactory()
	exp, err := f.CreateLogs(context.Background(), exportertest.NewNopSettings(f.Type()), e.cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	e.exp = exp
}

// restart shuts the exporter down and starts it again on the same endpoint,
// as a gateway restarts: its buffer empty, in a new epoch.
func (e *env) restart(t *testing.T) {
	t.Helper()
	require.NoError(t, e.exp.Shutdown(context.Background()))
	e.start(t)
}

func (e *env) push(t *testing.T, recs ...*flowrecord.Record) {
	t.Helper()
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for _, r := range recs {
		attrcodec.Encode(r, lrs.AppendEmpty())
	}
	require.NoError(t, e.exp.ConsumeLogs(context.Background(), ld))
}

// user creates a ServiceAccount with RoleBindings to antrea-flow-viewer in
// namespaces and returns a kubeconfig for it.
func (e *env) user(t *testing.T, name string, namespaces ...string) string {
	t.Helper()
	tok := e.cp.ServiceAccount(t, "team", name)
	for _, ns := range namespaces {
		_, err := e.cp.Admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			require.NoError(t, err)
		}
		_, err = e.cp.Admin.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "flows-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "antrea-flow-viewer"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team", Name: name}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return e.cp.Kubeconfig(t, name, tok)
}

func record(key, srcNS, srcPod, dstNS, dstPod string, end time.Time) *flowrecord.Record {
	return &flowrecord.Record{
		Start: end.Add(-time.Second), End: end, Observed: end, Protocol: 6, Key: key, FlowType: flowrecord.FlowTypeInterNode,
		Source: flowrecord.Endpoint{Address: netip.MustParseAddr("10.10.0.5"), Port: 43512, Kind: flowrecord.EndpointPod,
			Namespace: srcNS, PodName: srcPod, NodeName: "node-a"},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("10.10.1.7"), Port: 8080, Kind: flowrecord.EndpointPod,
			Namespace: dstNS, PodName: dstPod, NodeName: "node-b"},
		Stats: flowrecord.Counters{OctetTotal: 100, PacketTotal: 1},
	}
}

func decodeLines(t *testing.T, s string) []*pb.Flow {
	t.Helper()
	var out []*pb.Flow
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		f := &pb.Flow{}
		require.NoError(t, protojson.Unmarshal([]byte(line), f), line)
		out = append(out, f)
	}
	return out
}

func TestObserve(t *testing.T) {
	e := startEnv(t)
	now := time.Now()
	e.push(t,
		record("a-to-b", "ns-a", "web", "ns-b", "api", now.Add(-time.Hour)),
		record("b-to-c", "ns-b", "api", "ns-c", "db", now.Add(-time.Hour)),
		record("a-to-a", "ns-a", "web", "ns-a", "cache", now.Add(-time.Minute)))
	kc := e.user(t, "dev", "ns-a")
	base := []string{"observe", "--kubeconfig", kc, "--stream-server", e.addr, "--ca-file", e.ca}
	ctx := context.Background()

	out, errOut, code := flowctl(ctx, append(base, "-n", "ns-a", "-o", "jsonl")...)
	require.Zero(t, code, errOut)
	flows := decodeLines(t, out)
	require.Len(t, flows, 2, "nothing from other Namespaces")
	assert.Equal(t, "a-to-b", flows[0].Id)
	assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, flows[0].K8S.DestinationDisclosure)
	assert.Empty(t, flows[0].K8S.DestinationPodName)

	out, _, code = flowctl(ctx, append(base, "-n", "ns-a")...)
	require.Zero(t, code)
	assert.Contains(t, out, "SOURCE")
	assert.Contains(t, out, "ns-b/? 10.10.1.7:8080 [redacted]", "a redacted peer is marked")
	assert.Contains(t, out, "ns-a/cache 10.10.1.7:8080")

	out, _, code = flowctl(ctx, append(base, "-n", "ns-a", "-o", "jsonl", "--since", "10m")...)
	require.Zero(t, code)
	require.Len(t, decodeLines(t, out), 1, "--since")
	out, _, code = flowctl(ctx, append(base, "-n", "ns-a", "-o", "jsonl", "--last", "1")...)
	require.Zero(t, code)
	require.Equal(t, "a-to-a", decodeLines(t, out)[0].Id, "--last keeps the most recent")
	out, _, code = flowctl(ctx, append(base, "-n", "ns-a", "-o", "jsonl", "--pod", "cache", "--direction", "to")...)
	require.Zero(t, code)
	require.Len(t, decodeLines(t, out), 1, "--pod --direction")
	out, _, code = flowctl(ctx, append(base, "-n", "ns-a", "-o", "json")...)
	require.Zero(t, code)
	// json: indented Flow objects one after another (protojson varies its spacing).
	require.Contains(t, out, "\n  \"")
	dec := json.NewDecoder(strings.NewReader(out))
	var got []string
	for dec.More() {
		var f struct{ ID string }
		require.NoError(t, dec.Decode(&f))
		got = append(got, f.ID)
	}
	assert.Equal(t, []string{"a-to-b", "a-to-a"}, got)

	// Clear errors per status.
	_, errOut, code = flowctl(ctx, append(base, "-n", "ns-b")...)
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "permission denied: user \"system:serviceaccount:team:dev\" may not list flows")
	_, errOut, code = flowctl(ctx, append(base, "--cluster-wide", "-f")...)
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "may not watch flows")
	_, errOut, code = flowctl(ctx, "observe", "--kubeconfig", e.cp.Kubeconfig(t, "bogus", "bogus"), "--stream-server", e.addr, "--ca-file", e.ca, "-n", "ns-a")
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "not authenticated")
	_, errOut, code = flowctl(ctx, append(base, "-n", "ns-a", "--direction", "from", "--service", "api")...)
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "invalid request: filters[0].service_names")
	_, errOut, code = flowctl(ctx, "observe", "--kubeconfig", kc, "--stream-server", e.addr, "-n", "ns-a")
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "unavailable", "an unverified server certificate")
	_, errOut, code = flowctl(ctx, append(base, "-n", "ns-a", "-o", "yaml")...)
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, `-o: "yaml" is not table, json or jsonl`)

	t.Run("follow", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		done := make(chan int, 1)
		go func() {
			var errOut bytes.Buffer
			done <- run(ctx, append(base, "-n", "ns-a", "-o", "jsonl", "-f"), pw, &errOut)
			pw.Close()
		}()
		lines := bufio.NewScanner(pr)
		for range 2 { // history
			require.True(t, lines.Scan())
		}
		e.push(t, record("b-to-a-live", "ns-b", "api", "ns-a", "web", time.Now()), record("c-to-b-live", "ns-c", "db", "ns-b", "api", time.Now()))
		require.True(t, lines.Scan())
		live := decodeLines(t, lines.Text())
		require.Equal(t, "b-to-a-live", live[0].Id, "live, and nothing from other Namespaces")
		require.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, live[0].K8S.SourceDisclosure)
		cancel()
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		require.Zero(t, <-done)
	})

	t.Run("client certificate in the kubeconfig", func(t *testing.T) {
		_, err := e.cp.Admin.RbacV1().RoleBindings("ns-a").Create(context.Background(), &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "flows-alice"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "antrea-flow-viewer"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		cert := e.cp.ClientCertificate(t, "alice")
		key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		require.NoError(t, err)
		kc := filepath.Join(t.TempDir(), "alice.kubeconfig")
		require.NoError(t, os.WriteFile(kc, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: alice, user: {client-certificate-data: %q, client-key-data: %q}}]
contexts: [{name: test, context: {cluster: test, user: alice, namespace: ns-a}}]
current-context: test
`, e.cp.URL, b64(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})), b64(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}))), 0o600))
		// The CA bundle may still be loading right after start.
		require.Eventually(t, func() bool {
			out, _, code := flowctl(ctx, "observe", "--kubeconfig", kc, "--stream-server", e.addr, "--ca-file", e.ca, "-o", "jsonl")
			return code == 0 && strings.Count(out, "\n") >= 2
		}, 20*time.Second, 200*time.Millisecond, "the context's Namespace (ns-a) is the default scope")
	})

	t.Run("records", func(t *testing.T) {
		out, errOut, code := flowctl(ctx, "records", "--kubeconfig", kc, "--stream-server", e.addr, "--ca-file", e.ca, "-n", "ns-a",
			"--srcip", "10.10.0.5", "--dstport", "8080", "--proto", "tcp", "-o", "jsonl")
		require.Zero(t, code, errOut)
		require.GreaterOrEqual(t, len(decodeLines(t, out)), 2)
		out, _, code = flowctl(ctx, "records", "--kubeconfig", kc, "--stream-server", e.addr, "--ca-file", e.ca, "-n", "ns-a", "--dstport", "9999", "-o", "jsonl")
		require.Zero(t, code)
		require.Empty(t, strings.TrimSpace(out))
	})
}

// TestDiscover: flowctl finds the flow stream's Service only in the
// Namespace named by --flowtel-namespace, else in the kubeconfig context's
// and in flowtel's default (the manifests' flowtel), never in one an attacker
// chose (anyone who may create a Service can label it), and refuses to pick
// among several.
func TestDiscover(t *testing.T) {
	cp := controlplane.Start(t)
	ctx := context.Background()
	for _, ns := range []string{"flowtel", "aaa-attacker", "shop", "netflows"} {
		_, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	service := func(ns, name string) string {
		svc, err := cp.Admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"observability.antrea.io/flow-stream-service": "true"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "otlp-grpc", Port: 4317}, {Name: "flowstream-grpc", Port: 14740}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return net.JoinHostPort(svc.Spec.ClusterIP, "14740")
	}
	// kubeconfig writes an admin kubeconfig whose context names namespace (none if "").
	kubeconfig := func(namespace string) string {
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		require.NoError(t, os.WriteFile(kc, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: admin, namespace: %q}}]
current-context: test
`, cp.URL, cp.AdminToken, namespace), 0o600))
		return kc
	}
	dial := func(kc, flowtelNamespace string) (string, error) {
		s, err := (&connFlags{kube: kubeFlags(kc), streamNamespace: flowtelNamespace}).dial(ctx)
		if err != nil {
			return "", err
		}
		require.NoError(t, s.conn.Close())
		return s.target, nil
	}
	admin := kubeconfig("")

	_, err := dial(admin, "")
	require.ErrorContains(t, err, "no Service labelled observability.antrea.io/flow-stream-service=true with a port named flowstream-grpc in Namespace flowtel: is the flow_stream exporter deployed?")

	// An attacker labels a Service of theirs: it is not flowtel's Namespace.
	attacker := service("aaa-attacker", "flow-stream")
	_, err = dial(admin, "")
	require.ErrorContains(t, err, "in Namespace flowtel; labelled elsewhere: aaa-attacker/flow-stream, not used unless you name the Namespace")

	flowtel := service("flowtel", "flowtel-flowstream")
	target, err := dial(admin, "")
	require.NoError(t, err)
	require.Equal(t, flowtel, target, "flowtel's, not the attacker's (listed first)")
	target, err = dial(kubeconfig("shop"), "")
	require.NoError(t, err)
	require.Equal(t, flowtel, target, "the context's Namespace has none")

	// The user works in the attacker's Namespace: two candidates, no guess.
	_, err = dial(kubeconfig("aaa-attacker"), "")
	require.ErrorContains(t, err, "several flow stream Services (label observability.antrea.io/flow-stream-service=true, port flowstream-grpc): aaa-attacker/flow-stream, flowtel/flowtel-flowstream; flowctl cannot tell which is flowtel's")
	require.ErrorContains(t, err, "pass --flowtel-namespace with flowtel's Namespace, or --stream-server host:port")
	target, err = dial(kubeconfig("aaa-attacker"), "flowtel")
	require.NoError(t, err)
	require.Equal(t, flowtel, target, "--flowtel-namespace decides")
	target, err = dial(admin, "aaa-attacker")
	require.NoError(t, err)
	require.Equal(t, attacker, target, "what the user named, even so")

	// flowtel in a Namespace of its own (Helm, the other-namespace example): named by flag or context.
	netflows := service("netflows", "flowtel-flowstream")
	_, err = dial(admin, "shop")
	require.ErrorContains(t, err, "in Namespace shop; labelled elsewhere: aaa-attacker/flow-stream, flowtel/flowtel-flowstream, netflows/flowtel-flowstream, not used")
	target, err = dial(admin, "netflows")
	require.NoError(t, err)
	require.Equal(t, netflows, target)
	_, err = dial(kubeconfig("netflows"), "")
	require.ErrorContains(t, err, "several flow stream Services", "the context's and flowtel's")
	controlplane.CloseIdleConnections(cp.Admin)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// kubeFlags are kubectl's connection flags as if given --kubeconfig kc.
func kubeFlags(kc string) *genericclioptions.ConfigFlags {
	f := genericclioptions.NewConfigFlags(false)
	*f.KubeConfig = kc
	return f
}
