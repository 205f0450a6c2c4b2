//go:build integration

package flowstreamexporter

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/exporter/flowstreamexporter/internal/metadata"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

// cluster is a real kube-apiserver with the shipped ClusterRoles and a
// running flow_stream exporter authenticating with a ServiceAccount bound as
// the deploy manifests bind the gateway's.
type cluster struct {
	cp   *controlplane.ControlPlane
	cfg  *Config
	exp  exporter.Logs
	addr string
	// tel is the exporter's telemetry, kept across restarts.
	tel *componenttest.Telemetry
	// proxy, when set, stands between the exporter and the API server.
	proxy *tcpProxy
}

type clusterOption func(*Config)

func startCluster(t *testing.T, opts ...clusterOption) *cluster {
	t.Helper()
	cp := controlplane.Start(t)
	cp.ApplyClusterRoles(t, clusterRoles)
	c := &cluster{cp: cp}
	c.startExporter(t, true, opts...)
	return c
}

// startExporter starts a flow_stream exporter whose ServiceAccount has
// system:auth-delegator and, when canReadClientCA, the
// extension-apiserver-authentication-reader Role.
func (c *cluster) startExporter(t *testing.T, canReadClientCA bool, opts ...clusterOption) {
	t.Helper()
	name := "gateway"
	if !canReadClientCA {
		name = "gateway-no-ca"
	}
	cfg := createDefaultConfig().(*Config)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c.addr = l.Addr().String()
	require.NoError(t, l.Close())
	cfg.NetAddr.Endpoint = c.addr
	certFile, keyFile := c.cp.ServingCertificate(t)
	tc := configtls.NewDefaultServerConfig()
	tc.CertFile, tc.KeyFile = certFile, keyFile
	cfg.TLS = configoptional.Some(tc)
	cfg.Kubernetes.AuthType = "kubeConfig"
	cfg.Kubernetes.KubeConfig = c.cp.DelegatingServiceAccount(t, "flowtel", name, canReadClientCA)
	if c.proxy != nil {
		kc, err := os.ReadFile(cfg.Kubernetes.KubeConfig)
		require.NoError(t, err)
		kc = []byte(strings.Replace(string(kc), c.cp.URL, "https://"+c.proxy.addr, 1))
		require.NoError(t, os.WriteFile(cfg.Kubernetes.KubeConfig, kc, 0o600))
	}
	for _, o := range opts {
		o(cfg)
	}
	require.NoError(t, cfg.Validate())
	c.cfg = cfg
	c.run(t)
	if canReadClientCA {
		// Wait until the client CA bundle is loaded.
		cert := c.cp.ClientCertificate(t, "probe")
		require.Eventually(t, func() bool {
			_, err := c.open(t, certCred(cert), &pb.GetFlowsRequest{Namespaces: []string{"probe"}})
			return status.Code(err) != codes.Unavailable
		}, 30*time.Second, 100*time.Millisecond)
	}
}

// run starts an exporter from c.cfg.
func (c *cluster) run(t *testing.T) {
	t.Helper()
	if c.tel == nil {
		c.tel = componenttest.NewTelemetry()
		t.Cleanup(func() { _ = c.tel.Shutdown(context.Background()) })
	}
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = c.tel.NewTelemetrySettings()
	exp, err := createLogs(context.Background(), set, c.cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	c.exp = exp
}

// restart shuts the exporter down and starts a new one on the same
// endpoint, as a gateway restart does: a new ring, empty, in a new epoch.
func (c *cluster) restart(t *testing.T) {
	t.Helper()
	require.NoError(t, c.exp.Shutdown(context.Background()))
	c.run(t)
}

// credential is how a test client authenticates.
type credential struct {
	token string
	cert  *tls.Certificate
}

func tokenCred(tok string) credential       { return credential{token: tok} }
func certCred(c tls.Certificate) credential { return credential{cert: &c} }

func (c *cluster) conn(t *testing.T, cred credential) *grpc.ClientConn {
	t.Helper()
	tc := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test server's self-signed certificate
	if cred.cert != nil {
		tc.Certificates = []tls.Certificate{*cred.cert}
	}
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func withToken(ctx context.Context, cred credential) context.Context {
	if cred.token != "" {
		ctx = grpcmd.AppendToOutgoingContext(ctx, "authorization", "Bearer "+cred.token)
	}
	return ctx
}

// open reads a history-only stream to its end: its flows, or the error it ended with.
func (c *cluster) open(t *testing.T, cred credential, req *pb.GetFlowsRequest) ([]*pb.Flow, error) {
	t.Helper()
	resps, err := c.responses(t, cred, req)
	flows, _ := historyFlows(resps)
	return flows, err
}

func (c *cluster) push(t *testing.T, recs ...*flowrecord.Record) {
	t.Helper()
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for _, r := range recs {
		attrcodec.Encode(r, lrs.AppendEmpty())
	}
	require.NoError(t, c.exp.ConsumeLogs(context.Background(), ld))
}

// serviceAccount creates ns/name, RoleBindings of the given ClusterRoles in
// the given Namespaces ("" = a ClusterRoleBinding), and returns its token.
func (c *cluster) serviceAccount(t *testing.T, ns, name string, bindings map[string][]string) string {
	t.Helper()
	tok := c.cp.ServiceAccount(t, ns, name)
	for role, namespaces := range bindings {
		for _, bns := range namespaces {
			c.bind(t, bns, role, rbacv1.Subject{Kind: "ServiceAccount", Namespace: ns, Name: name})
		}
	}
	return tok
}

// bind creates a RoleBinding (or, for namespace "", a ClusterRoleBinding) of
// a ClusterRole, or of a Role when role starts with "Role:".
func (c *cluster) bind(t *testing.T, namespace, role string, subject rbacv1.Subject) string {
	t.Helper()
	ctx := context.Background()
	kind := "ClusterRole"
	if r, ok := strings.CutPrefix(role, "Role:"); ok {
		kind, role = "Role", r
	}
	name := fmt.Sprintf("%s-%s-%d", role, subject.Name, bindings.Add(1))
	ref := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: kind, Name: role}
	if namespace == "" {
		_, err := c.cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: []rbacv1.Subject{subject}}, metav1.CreateOptions{})
		require.NoError(t, err)
	} else {
		c.namespace(t, namespace)
		_, err := c.cp.Admin.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: []rbacv1.Subject{subject}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	c.waitGranted(t, namespace, kind, role, subject)
	return name
}

// waitGranted waits until the API server's authorizer, whose RBAC cache
// follows bindings a moment after they are written, grants subject the
// role's first rule: a test that opens a stream right after binding would
// otherwise race it (PermissionDenied under load).
func (c *cluster) waitGranted(t *testing.T, namespace, kind, role string, subject rbacv1.Subject) {
	t.Helper()
	ctx := context.Background()
	var rules []rbacv1.PolicyRule
	if kind == "Role" {
		r, err := c.cp.Admin.RbacV1().Roles(namespace).Get(ctx, role, metav1.GetOptions{})
		require.NoError(t, err)
		rules = r.Rules
	} else {
		r, err := c.cp.Admin.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		require.NoError(t, err)
		rules = r.Rules
	}
	if len(rules) == 0 || len(rules[0].Verbs) == 0 || len(rules[0].Resources) == 0 {
		return
	}
	rule := rules[0]
	spec := authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
		Namespace: namespace, Verb: rule.Verbs[0], Resource: rule.Resources[0]}}
	if len(rule.APIGroups) > 0 {
		spec.ResourceAttributes.Group = rule.APIGroups[0]
	}
	switch subject.Kind {
	case "Group":
		spec.User, spec.Groups = "flowtel-test-probe", []string{subject.Name}
	case "ServiceAccount":
		spec.User, spec.Groups = "system:serviceaccount:"+subject.Namespace+":"+subject.Name, []string{"system:serviceaccounts"}
	default:
		spec.User = subject.Name
	}
	require.Eventually(t, func() bool {
		r, err := c.cp.Admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	}, 10*time.Second, 50*time.Millisecond, "%s %s bound to %s in %q is not granted %v", subject.Kind, subject.Name, role, namespace, rule)
}

func (c *cluster) namespace(t *testing.T, ns string) {
	_, err := c.cp.Admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

var bindings atomic.Int64

// clusterRoles are the shipped ClusterRoles.
var clusterRoles = filepath.Join("..", "..", "deploy", "kubernetes", "components", "flow-stream", "clusterroles.yaml")

// tcpProxy forwards to the API server until cut, which closes every
// connection and refuses new ones until restore: an API blip.
type tcpProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
	wg           sync.WaitGroup
}

func newTCPProxy(t *testing.T, targetURL string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{target: strings.TrimPrefix(targetURL, "https://")}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *tcpProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.serve(ln)
}
