package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// How the flow stream's Service is found.
const (
	serviceLabel = "observability.antrea.io/flow-stream-service=true"
	portName     = "flowstream-grpc"
)

var errUsage = errors.New("usage")

// connFlags say where the stream is and who the caller is.
type connFlags struct {
	kubeconfig  string
	kubecontext string
	server      string
	serverName  string
	caFile      string
	insecure    bool
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then ~/.kube/config); its user's token or client certificate is the credential")
	fs.StringVar(&c.kubecontext, "context", "", "kubeconfig context (default the current one)")
	fs.StringVar(&c.server, "server", "", "flow stream address host:port (default: the Service labelled "+serviceLabel+", port "+portName+")")
	fs.StringVar(&c.serverName, "tls-server-name", "", "name to verify the server certificate against (default <service>.<namespace>.svc, or the --server host)")
	fs.StringVar(&c.caFile, "ca-file", "", "CA bundle to verify the server certificate (default the system roots)")
	fs.BoolVar(&c.insecure, "insecure-skip-tls-verify", false, "do not verify the server certificate (the connection is still encrypted)")
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
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.kubecontext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	s := &session{namespace: ns}
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
		target, name, err := discover(ctx, cfg)
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
		return nil, fmt.Errorf("--server %q: %w", s.target, err)
	}
	return s, nil
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

// discover finds the flow stream's Service by its label and returns its
// ClusterIP address (reachable from inside the cluster; use --server with a
// port-forward from outside) and its DNS name.
func discover(ctx context.Context, cfg *rest.Config) (target, name string, err error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", "", err
	}
	list, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{LabelSelector: serviceLabel})
	if err != nil {
		return "", "", fmt.Errorf("finding the flow stream Service (label %s): %w; pass --server host:port instead", serviceLabel, err)
	}
	for _, svc := range list.Items {
		for _, p := range svc.Spec.Ports {
			if p.Name == portName && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != "None" {
				return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(p.Port))), svc.Name + "." + svc.Namespace + ".svc", nil
			}
		}
	}
	return "", "", fmt.Errorf("no Service labelled %s with a port named %s: is the flow_stream exporter deployed? Pass --server host:port otherwise", serviceLabel, portName)
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
