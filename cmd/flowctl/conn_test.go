package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/flowtel/flowtel/internal/testpki"
)

// impostor is a TLS gRPC server flowctl has no reason to trust (its CA is
// not the caller's): it answers every call Unimplemented and records the
// credentials it was sent, a bearer token or a client certificate.
type impostor struct {
	addr, caFile string

	mu     sync.Mutex
	tokens []string
	certs  []string
}

func startImpostor(t *testing.T) *impostor {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "impostor-ca")
	certFile, keyFile := ca.Issue(t, "impostor", x509.ExtKeyUsageServerAuth)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	p := &impostor{caFile: ca.CertFile}
	srv := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12})),
		grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			md, _ := grpcmd.FromIncomingContext(stream.Context())
			p.tokens = append(p.tokens, md.Get("authorization")...)
			if pr, ok := peer.FromContext(stream.Context()); ok {
				if ti, ok := pr.AuthInfo.(credentials.TLSInfo); ok {
					for _, c := range ti.State.PeerCertificates {
						p.certs = append(p.certs, c.Subject.CommonName)
					}
				}
			}
			return status.Error(codes.Unimplemented, "not a flow stream")
		}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	p.addr = l.Addr().String()
	return p
}

func (p *impostor) seen() (tokens, certs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.tokens...), append([]string(nil), p.certs...)
}

// writeKubeconfig writes a kubeconfig whose user has the given credentials.
// Its API server is never contacted (the tests pass --server).
func writeKubeconfig(t *testing.T, user string) string {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: %s}]
contexts: [{name: test, context: {cluster: test, user: u, namespace: ns-a}}]
current-context: test
`, user), 0o600))
	return kc
}

// TestNoCredentialToAnUnverifiedServer: with --insecure-skip-tls-verify,
// flowctl sends neither the kubeconfig's bearer token nor its client
// certificate unless --send-credentials-to-unverified-server accepts that
// whoever answers gets them; with the server's CA it sends them.
func TestNoCredentialToAnUnverifiedServer(t *testing.T) {
	p := startImpostor(t)
	ctx := context.Background()
	tokenKC := writeKubeconfig(t, `{token: secret-token}`)

	dir := t.TempDir()
	clientCA := testpki.NewCA(t, dir, "client-ca")
	certFile, keyFile := clientCA.Issue(t, "alice", x509.ExtKeyUsageClientAuth)
	certKC := writeKubeconfig(t, fmt.Sprintf(`{client-certificate: %q, client-key: %q}`, certFile, keyFile))

	for _, cmd := range [][]string{{"observe", "-n", "ns-a"}, {"records"}, {"map", "--since", "1m"}, {"ui", "--listen", "127.0.0.1:0"}} {
		for _, kc := range []string{tokenKC, certKC} {
			// (ui would serve until interrupted if it started)
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, errOut, code := flowctl(cctx, append(cmd, "--kubeconfig", kc, "--stream-server", p.addr, "--stream-insecure-skip-tls-verify")...)
			cancel()
			assert.Equal(t, 1, code, "%v: %s", cmd, errOut)
			assert.Contains(t, errOut, "--stream-insecure-skip-tls-verify: refusing to send your credentials", cmd)
			assert.Contains(t, errOut, "--send-credentials-to-unverified-server", cmd)
		}
	}
	tokens, certs := p.seen()
	require.Empty(t, tokens, "a token went to a server whose certificate was not verified")
	require.Empty(t, certs, "a client certificate went to a server whose certificate was not verified")

	// The opt-out does what it says.
	_, errOut, code := flowctl(ctx, "observe", "--kubeconfig", tokenKC, "--stream-server", p.addr, "--stream-insecure-skip-tls-verify", "--send-credentials-to-unverified-server")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "does not serve the flow stream")
	tokens, _ = p.seen()
	require.Equal(t, []string{"Bearer secret-token"}, tokens)

	// Verified (the impostor's CA given): the credentials go, as they should to a trusted server.
	_, errOut, code = flowctl(ctx, "observe", "--kubeconfig", certKC, "--stream-server", p.addr, "--ca-file", p.caFile)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "does not serve the flow stream")
	_, certs = p.seen()
	require.Equal(t, []string{"alice"}, certs)
	assert.False(t, strings.Contains(errOut, "refusing"))
}

func flowctl(ctx context.Context, args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = run(ctx, args, &o, &e)
	return o.String(), e.String(), code
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
