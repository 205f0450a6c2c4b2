// Package controlplane runs a real etcd and kube-apiserver for tests
// (architecture §4): token and client-certificate authentication, RBAC
// authorization, ServiceAccount tokens through the TokenRequest API. There is no scheduler, controller
// manager or kubelet: tests create Nodes, Pods (IPs through the status
// subresource) and Services themselves.
//
// The binaries come from build.sh (built once from Go modules and cached),
// or from the directory in $FLOWTEL_CONTROLPLANE_BIN.
package controlplane

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flowtel/flowtel/testbed/ports"
	"github.com/flowtel/flowtel/testbed/proc"
)

// Service address ranges of the test API server (dual-stack).
const (
	ServiceCIDRv4 = "10.96.0.0/16"
	ServiceCIDRv6 = "fd00:10:96::/108"
)

// ControlPlane is a running etcd + kube-apiserver.
type ControlPlane struct {
	// URL is the API server's https URL (self-signed certificate).
	URL string
	// AdminToken authenticates as "admin" in group system:masters.
	AdminToken string
	// Admin is a clientset authenticated with AdminToken.
	Admin kubernetes.Interface
	// Dir holds the data, certificates, logs and kubeconfigs; removed at cleanup.
	Dir string
	// ClientCA signs client certificates the API server accepts (its
	// --client-ca-file, which it also publishes in the ConfigMap
	// kube-system/extension-apiserver-authentication); see ClientCertificate.
	ClientCA    *x509.Certificate
	clientCAKey crypto.Signer
	// ServiceAccountKey is the private key that signs ServiceAccount tokens
	// (a controller manager's --service-account-private-key-file).
	ServiceAccountKey string
	// ServingCA verifies the API server's certificate (cluster mode only; the
	// loopback control plane serves a self-signed one).
	ServingCA string

	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	netns string
}

// built is build.sh, run at the first Binaries call without FLOWTEL_CONTROLPLANE_BIN.
var built proc.BuildScript

// Binaries returns the directory holding kube-apiserver and etcd, building
// them with build.sh on first use (minutes when the cache is cold).
func Binaries() (string, error) {
	if d := os.Getenv("FLOWTEL_CONTROLPLANE_BIN"); d != "" {
		return d, nil
	}
	_, self, _, _ := runtime.Caller(0)
	return built.Dir(self, "the control plane")
}

// Start runs etcd and kube-apiserver on free loopback ports until the test ends.
func Start(t testing.TB) *ControlPlane { return StartWith(t, Options{}) }

// Options places the control plane for a cluster with real kubelets, or
// changes the API server's flags.
type Options struct {
	// NetNS is a network namespace (a path under /run/netns) to run etcd and
	// the API server in; "" runs them in the test's own, on loopback.
	NetNS string
	// Address is the API server's address inside NetNS (its advertise address:
	// the endpoint of the default kubernetes Service); it serves on port 6443.
	Address string
	// Dial reaches NetNS's addresses from the test process.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ExtraArgs are added to the API server's flags, with or without NetNS
	// (for instance --enable-admission-plugins=...).
	ExtraArgs []string
}

// cluster reports whether the control plane serves real kubelets: Node
// authorization, NodeRestriction and ServiceAccount admission, and a serving
// certificate Pods verify through the kubernetes Service.
func (o Options) cluster() bool { return o.NetNS != "" }

// StartWith runs etcd and kube-apiserver until the test ends; see Options.
func StartWith(t testing.TB, o Options) *ControlPlane {
	t.Helper()
	bin, err := Binaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cp := &ControlPlane{Dir: dir, AdminToken: randomToken(), dial: o.Dial, netns: o.NetNS}

	etcdClient, etcdPeer, apiPort := freePort(t), freePort(t), freePort(t)
	bind := "127.0.0.1"
	if o.cluster() {
		apiPort, bind = 6443, o.Address
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	cp.start(t, "etcd", filepath.Join(bin, "etcd"),
		"--name", "flowtel", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "flowtel="+peerURL, "--log-level", "warn")
	noKeepAlive := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: o.Dial}, Timeout: 5 * time.Second}
	waitFor(t, dir, "etcd", func() bool {
		resp, err := noKeepAlive.Get(etcdURL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	saKey, saPub := writeServiceAccountKeys(t, dir)
	cp.ServiceAccountKey = saKey
	clientCAFile := cp.writeClientCA(t, dir)
	tokens := filepath.Join(dir, "tokens.csv")
	must(t, os.WriteFile(tokens, []byte(cp.AdminToken+`,admin,uid-admin,"system:masters"`+"\n"), 0o600))
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + bind, "--advertise-address=" + bind,
		fmt.Sprintf("--secure-port=%d", apiPort), "--cert-dir=" + filepath.Join(dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saPub, "--service-account-signing-key-file=" + saKey,
		"--token-auth-file=" + tokens, "--client-ca-file=" + clientCAFile,
		"--service-cluster-ip-range=" + ServiceCIDRv4 + "," + ServiceCIDRv6,
	}
	if o.cluster() {
		// As kubeadm sets it up: kubelets authorized as Nodes, Pods given
		// kube-api-access volumes, a serving certificate for the kubernetes
		// Service's names and addresses, and a client certificate for kubelets.
		cert, key := cp.writeServing(t, dir, o.Address)
		kcert, kkey := cp.writeKeyPair(t, dir, "apiserver-kubelet-client", cp.ClientCertificate(t, "kube-apiserver-kubelet-client", "system:masters"))
		cp.ServingCA = clientCAFile
		args = append(args, "--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--tls-cert-file="+cert, "--tls-private-key-file="+key,
			"--kubelet-client-certificate="+kcert, "--kubelet-client-key="+kkey,
			"--kubelet-preferred-address-types=InternalIP",
			"--allow-privileged=true")
	} else {
		args = append(args, "--authorization-mode=RBAC",
			// No controller manager creates the default ServiceAccount.
			"--disable-admission-plugins=ServiceAccount",
			// Required with a loopback advertise address.
			"--endpoint-reconciler-type=none")
	}
	args = append(args, o.ExtraArgs...)
	cp.start(t, "kube-apiserver", filepath.Join(bin, "kube-apiserver"), args...)
	cp.URL = fmt.Sprintf("https://%s", net.JoinHostPort(bind, fmt.Sprint(apiPort)))
	cfg := cp.Config(cp.AdminToken)
	admin, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	cp.Admin = admin
	// Close the admin client's connections before the processes stop, so
	// no connection goroutine outlives the test (goleak).
	t.Cleanup(func() { CloseIdleConnections(admin) })
	waitFor(t, dir, "kube-apiserver", func() bool {
		body, err := cp.Admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil && string(body) == "ok"
	})
	return cp
}

// start runs a control plane process, in the control plane's network namespace if it has one.
func (cp *ControlPlane) start(t testing.TB, name, path string, args ...string) {
	t.Helper()
	if cp.netns != "" {
		args = append([]string{"--net=" + cp.netns, "--", path}, args...)
		path = "nsenter"
	}
	StartProcess(t, cp.Dir, name, path, args...)
}

// Start runs another process of the control plane (a controller manager, a
// scheduler) beside the API server, with its log in Dir, until the test ends.
func (cp *ControlPlane) Start(t testing.TB, name, path string, args ...string) {
	t.Helper()
	cp.start(t, name, path, args...)
}

// Config is a client configuration authenticating with token.
func (cp *ControlPlane) Config(token string) *rest.Config {
	return &rest.Config{Host: cp.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, Timeout: 30 * time.Second, Dial: cp.dial}
}

// Kubeconfig writes a kubeconfig file authenticating with token and returns its path.
func (cp *ControlPlane) Kubeconfig(t testing.TB, name, token string) string {
	t.Helper()
	path := filepath.Join(cp.Dir, name+".kubeconfig")
	must(t, os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: %s, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: %s}}]
current-context: test
`, cp.URL, name, token, name), 0o600))
	return path
}

// ServiceAccount creates namespace/name (and the namespace), binds it to
// the given ClusterRoles, and returns a token for it from the TokenRequest API.
// Aggregated ClusterRoles (view, edit, admin) have no rules here: no
// controller manager aggregates them.
func (cp *ControlPlane) ServiceAccount(t testing.TB, namespace, name string, clusterRoles ...string) string {
	t.Helper()
	ctx := context.Background()
	_, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = cp.Admin.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, err)
	for _, role := range clusterRoles {
		_, err := cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + name + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: name}},
		}, metav1.CreateOptions{})
		must(t, err)
	}
	tr, err := cp.Admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))},
	}, metav1.CreateOptions{})
	must(t, err)
	return tr.Status.Token
}

// PodToken creates Pod namespace/pod on node, running as ServiceAccount
// serviceAccount (which must exist), and returns a token of that
// ServiceAccount for audience bound to the Pod: what the kubelet mounts from a
// projected serviceAccountToken volume. TokenReview names the Pod's Node.
func (cp *ControlPlane) PodToken(t testing.TB, namespace, pod, serviceAccount, node, audience string) string {
	t.Helper()
	ctx := context.Background()
	p, err := cp.Admin.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: serviceAccount,
			Containers: []corev1.Container{{Name: "collector", Image: "registry.example/collector:test"}}}}, metav1.CreateOptions{})
	must(t, err)
	tr, err := cp.Admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr(int64(3600)),
			BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}},
	}, metav1.CreateOptions{})
	must(t, err)
	return tr.Status.Token
}

// DelegatingServiceAccount creates namespace/name for a server that
// delegates authentication and authorization to the API server, as
// extension API servers do: bound to system:auth-delegator (TokenReviews,
// SubjectAccessReviews) and, with readClientCA, to the
// extension-apiserver-authentication-reader Role (the client CA ConfigMap).
// It returns a kubeconfig for it.
func (cp *ControlPlane) DelegatingServiceAccount(t testing.TB, namespace, name string, readClientCA bool) string {
	t.Helper()
	token := cp.ServiceAccount(t, namespace, name, "system:auth-delegator")
	if readClientCA {
		_, err := cp.Admin.RbacV1().RoleBindings("kube-system").Create(context.Background(), &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + name + "-auth-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "extension-apiserver-authentication-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: name}},
		}, metav1.CreateOptions{})
		must(t, err)
	}
	return cp.Kubeconfig(t, namespace+"-"+name, token)
}

// ApplyClusterRoles creates the ClusterRoles of a multi-document YAML file.
func (cp *ControlPlane) ApplyClusterRoles(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	d := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var role rbacv1.ClusterRole
		if err := d.Decode(&role); errors.Is(err, io.EOF) {
			return
		} else {
			must(t, err)
		}
		_, err := cp.Admin.RbacV1().ClusterRoles().Create(context.Background(), &role, metav1.CreateOptions{})
		must(t, err)
	}
}

// CloseIdleConnections closes a clientset's idle connections (client-go
// shares transports between clients built from equal configs).
func CloseIdleConnections(c kubernetes.Interface) {
	if rc, ok := c.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil && rc.Client != nil {
		utilnet.CloseIdleConnectionsFor(rc.Client.Transport)
	}
}

func ptr[T any](v T) *T { return &v }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort(t testing.TB) int {
	p, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// StartProcess runs a binary with its output in dir/name.log, and stops it
// (SIGTERM, then SIGKILL after 10 s) when the test ends. The binary dies with
// the test process (Pdeathsig).
func StartProcess(t testing.TB, dir, name, path string, args ...string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	must(t, err)
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		proc.Stop(cmd.Process, syscall.SIGTERM, exited, 10*time.Second)
		logf.Close()
	})
	return cmd
}

// waitFor polls ready for up to 60 s; on timeout it fails with the process log's tail.
func waitFor(t testing.TB, dir, name string, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			if len(log) > 4000 {
				log = log[len(log)-4000:]
			}
			t.Fatalf("%s not ready after 60 s; log tail:\n%s", name, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
