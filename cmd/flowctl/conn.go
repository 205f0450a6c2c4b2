package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// How the flow stream's Service is found.
const (
	serviceLabel = "observability.antrea.io/flow-stream-service=true"
	portName     = "flowstream-grpc"
	// streamNamespace is the Namespace the shipped manifests (the kustomize
	// base and the Operator's) install flowtel in; Helm uses its release's.
	streamNamespace = "flowtel"
)

// sendUnverifiedFlag opts out of refusing to send credentials to a server
// whose certificate is not verified; its name says what it risks.
const sendUnverifiedFlag = "send-credentials-to-unverified-server"

// connFlags say where the stream is and who the caller is: kube is the
// Kubernetes connection (kubectl's flags, on the root command), the rest the
// flow stream's own.
type connFlags struct {
	kube       *genericclioptions.ConfigFlags
	server     string
	serverName string
	caFile     string
	insecure   bool
	// sendUnverified: with insecure, send the credentials anyway.
	sendUnverified bool
	// streamNamespace is where discovery looks for the Service; empty: the
	// kubeconfig context's Namespace and flowtel's default.
	streamNamespace string
}

// The flow stream's flags whose kubectl namesakes (--server,
// --tls-server-name, --insecure-skip-tls-verify) are the API server's.
const (
	streamServerFlag   = "stream-server"
	streamNameFlag     = "stream-tls-server-name"
	streamInsecureFlag = "stream-insecure-skip-tls-verify"
)

func (c *connFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.server, streamServerFlag, "", "flow stream address host:port (default: the Service labelled "+serviceLabel+", port "+portName+"); --server is the API server's, as in kubectl")
	fs.StringVar(&c.serverName, streamNameFlag, "", "name to verify the flow stream's certificate against (default <service>.<namespace>.svc, or the --"+streamServerFlag+" host)")
	fs.StringVar(&c.caFile, "ca-file", "", "CA bundle to verify the flow stream's certificate (default the system roots)")
	fs.BoolVar(&c.insecure, streamInsecureFlag, false, "do not verify the flow stream's certificate (the connection is still encrypted); flowctl then refuses to send your credentials unless --"+sendUnverifiedFlag)
	fs.BoolVar(&c.sendUnverified, sendUnverifiedFlag, false, "with --"+streamInsecureFlag+", send your bearer token or client certificate anyway: whoever answers at the address, or intercepts it, can use the token as you")
	fs.StringVar(&c.streamNamespace, "flowtel-namespace", "", "Namespace of the flow stream's Service (default: the kubeconfig context's Namespace and "+streamNamespace+"; Services elsewhere are never used)")
}

// session is an authenticated connection to the flow stream.
type session struct {
	conn      *grpc.ClientConn
	token     string
	namespace string // the kubeconfig context's Namespace
	target    string
}

func (s *session) context(ctx context.Context) context.Context {
	if s.token != "" {
		return grpcmd.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.token)
	}
	return ctx
}

func (c *connFlags) dial(ctx context.Context) (*session, error) {
	// flowctl always sends a credential (a token or a client certificate):
	// to a server that proved nothing, that is handing it to whoever
	// answers, or a Service anyone may have labelled.
	if c.insecure && !c.sendUnverified {
		return nil, fmt.Errorf("--%s: refusing to send your credentials (the kubeconfig's bearer token or client certificate) to a server whose certificate is not verified: whoever answers could stream, or use the token, as you. Verify it with --ca-file (and --stream-tls-server-name), or add --%s to accept that risk", streamInsecureFlag, sendUnverifiedFlag)
	}
	cc, cfg, ns, err := loadKube(c.kube)
	if err != nil {
		return nil, err
	}
	// The stream authenticates the token or certificate itself: it acts on
	// no impersonation headers.
	if cfg.Impersonate.UserName != "" || cfg.Impersonate.UID != "" || len(cfg.Impersonate.Groups) > 0 || len(cfg.Impersonate.Extra) > 0 {
		return nil, errors.New("--as, --as-uid, --as-group, --as-user-extra: the flow stream does not impersonate: it streams as the user whose token or client certificate it receives; use a context (or --token) of the user to stream as")
	}
	s := &session{namespace: ns}
	namespaces := []string{c.streamNamespace}
	if c.streamNamespace == "" {
		namespaces = []string{streamNamespace}
		if cns := contextNamespace(cc, *c.kube.Context); cns != "" && cns != streamNamespace {
			namespaces = []string{cns, streamNamespace}
		}
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.insecure} //nolint:gosec // only with --insecure-skip-tls-verify
	if s.token, err = bearerToken(cfg); err != nil {
		return nil, err
	}
	if cert, ok, err := clientCertificate(cfg); err != nil {
		return nil, err
	} else if ok {
		tc.Certificates = []tls.Certificate{cert}
	}
	if s.token == "" && len(tc.Certificates) == 0 {
		return nil, errors.New("kubeconfig: the user has neither a token nor a client certificate (exec and auth-provider plugins are not supported): use a context with one")
	}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file: no certificate in %s", c.caFile)
		}
	}
	s.target, tc.ServerName = c.server, c.serverName
	if s.target == "" {
		target, name, err := discover(ctx, cfg, namespaces)
		if err != nil {
			return nil, err
		}
		s.target = target
		if tc.ServerName == "" {
			tc.ServerName = name
		}
	}
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(s.target)
	}
	s.conn, err = grpc.NewClient(s.target, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		// A following stream reconnects by itself (reader.run): the
		// connection's own backoff must not outlast the reader's.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: firstRetry, Multiplier: 1.6, Jitter: 0.2, MaxDelay: maxRetry}, MinConnectTimeout: 5 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %w", streamServerFlag, s.target, err)
	}
	return s, nil
}

// loadKube reads the kubeconfig as kubectl's flags say (--kubeconfig, else
// $KUBECONFIG, then ~/.kube/config; --context, --user, --token, --server,
// ...): the REST config and the Namespace (-n, else the context's).
func loadKube(kube *genericclioptions.ConfigFlags) (clientcmd.ClientConfig, *rest.Config, string, error) {
	cc := kube.ToRawKubeConfigLoader()
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	return cc, cfg, ns, nil
}

func bearerToken(cfg *rest.Config) (string, error) {
	if cfg.BearerToken != "" {
		return cfg.BearerToken, nil
	}
	if cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return "", fmt.Errorf("kubeconfig: token file: %w", err)
		}
		return string(b), nil
	}
	return "", nil
}

func clientCertificate(cfg *rest.Config) (tls.Certificate, bool, error) {
	certPEM, keyPEM := cfg.CertData, cfg.KeyData
	var err error
	if len(certPEM) == 0 && cfg.CertFile != "" {
		if certPEM, err = os.ReadFile(cfg.CertFile); err != nil {
			return tls.Certificate{}, false, fmt.Errorf("kubeconfig: client certificate: %w", err)
		}
	}
	if len(keyPEM) == 0 && cfg.KeyFile != "" {
		if keyPEM, err = os.ReadFile(cfg.KeyFile); err != nil {
			return tls.Certificate{}, false, fmt.Errorf("kubeconfig: client key: %w", err)
		}
	}
	if len(certPEM) == 0 {
		return tls.Certificate{}, false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, false, fmt.Errorf("kubeconfig: client certificate: %w", err)
	}
	return cert, true, nil
}

// contextNamespace is the Namespace the kubeconfig context names, or "" when
// it names none (client-go's "default" is then no statement of the user's).
func contextNamespace(cc clientcmd.ClientConfig, name string) string {
	raw, err := cc.RawConfig()
	if err != nil {
		return ""
	}
	if name == "" {
		name = raw.CurrentContext
	}
	if kctx := raw.Contexts[name]; kctx != nil {
		return kctx.Namespace
	}
	return ""
}

// discover finds the flow stream's Service by its label in the given
// Namespaces only (anyone who may create a Service in some Namespace can
// label it) and returns its ClusterIP address (reachable from inside the
// cluster; use --stream-server with a port-forward from outside) and its DNS name.
// Several candidates are an error: flowctl cannot tell which is flowtel's.
func discover(ctx context.Context, cfg *rest.Config, namespaces []string) (target, name string, err error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", "", err
	}
	type candidate struct{ id, target, name string }
	var found []candidate
	var failed []string
	for _, ns := range namespaces {
		list, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: serviceLabel})
		if err != nil {
			failed = append(failed, fmt.Sprintf("listing Services in %s: %v", ns, err))
			continue
		}
		for _, svc := range list.Items {
			if t, ok := streamPort(&svc); ok {
				found = append(found, candidate{svc.Namespace + "/" + svc.Name, t, svc.Name + "." + svc.Namespace + ".svc"})
			}
		}
	}
	switch {
	case len(found) == 1:
		return found[0].target, found[0].name, nil
	case len(found) > 1:
		ids := make([]string, len(found))
		for i, c := range found {
			ids[i] = c.id
		}
		return "", "", fmt.Errorf("several flow stream Services (label %s, port %s): %s; flowctl cannot tell which is flowtel's (anyone who may create a Service can label it): pass --flowtel-namespace with flowtel's Namespace, or --stream-server host:port",
			serviceLabel, portName, strings.Join(ids, ", "))
	}
	msg := fmt.Sprintf("no Service labelled %s with a port named %s in Namespace %s", serviceLabel, portName, strings.Join(namespaces, " or "))
	if len(failed) > 0 {
		msg += " (" + strings.Join(failed, "; ") + ")"
	}
	// Name the labelled Services elsewhere, if the user may list them: a
	// hint only, none is used without --flowtel-namespace.
	var elsewhere []string
	if list, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{LabelSelector: serviceLabel}); err == nil {
		for _, svc := range list.Items {
			if _, ok := streamPort(&svc); ok && !slices.Contains(namespaces, svc.Namespace) {
				elsewhere = append(elsewhere, svc.Namespace+"/"+svc.Name)
			}
		}
	}
	if len(elsewhere) > 0 {
		return "", "", fmt.Errorf("%s; labelled elsewhere: %s, not used unless you name the Namespace: if one is flowtel's, pass --flowtel-namespace with its Namespace, or --stream-server host:port", msg, strings.Join(elsewhere, ", "))
	}
	return "", "", fmt.Errorf("%s: is the flow_stream exporter deployed? If flowtel runs in another Namespace, pass --flowtel-namespace; or --stream-server host:port", msg)
}

// streamPort is the ClusterIP address of svc's flow stream port.
func streamPort(svc *corev1.Service) (string, bool) {
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == "None" {
		return "", false
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == portName {
			return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(p.Port))), true
		}
	}
	return "", false
}

// explain turns a gRPC status into what the user can do about it.
func explain(err error, target string) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Unauthenticated:
		return fmt.Errorf("not authenticated: %s; check the kubeconfig user (a valid token, or a client certificate signed by the cluster's client CA)", st.Message())
	case codes.PermissionDenied:
		return fmt.Errorf("permission denied: %s", st.Message())
	case codes.InvalidArgument:
		return fmt.Errorf("invalid request: %s", st.Message())
	case codes.ResourceExhausted:
		return fmt.Errorf("too many streams: %s", st.Message())
	case codes.Unavailable:
		return fmt.Errorf("flow stream at %s unavailable: %s", target, st.Message())
	case codes.Unimplemented:
		return fmt.Errorf("%s does not serve the flow stream: %s", target, st.Message())
	case codes.Canceled:
		return nil
	}
	return fmt.Errorf("%s: %s", st.Code(), st.Message())
}
