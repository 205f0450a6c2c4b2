//go:build integration

package nodeidentityprocessor

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
)

// fault is what the proxy in front of the API server does to a request.
type fault int32

const (
	pass      fault = iota // forward to the API server
	status503              // answer 503 Service Unavailable
	status429              // answer 429 Too Many Requests
	hangUp                 // close the connection without an answer
	stall                  // answer nothing until the client gives up
)

// apiProxy is a TLS reverse proxy in front of the real API server that
// injects faults, and can stop listening (connection refused) and start
// again on the same address: the API server unreachable, then back.
//
// No handler outlives the test: a stalled request returns when its client
// gives up, when the proxy goes down, or when the test ends, whichever is
// first, so closing the proxy cannot wait on it.
type apiProxy struct {
	t       *testing.T
	target  *url.URL
	addr    string
	srv     *httptest.Server
	fault   atomic.Int32
	forward *http.Transport
	// release is closed, and replaced, when the proxy goes down or the
	// test ends: stalled handlers return.
	mu      sync.Mutex
	release chan struct{}
}

// maxStall bounds a stalled request should nothing else end it.
const maxStall = 20 * time.Second

func newAPIProxy(t *testing.T, apiURL string) *apiProxy {
	u, err := url.Parse(apiURL)
	require.NoError(t, err)
	p := &apiProxy{t: t, target: u, forward: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	p.start("127.0.0.1:0")
	p.addr = p.srv.Listener.Addr().String()
	t.Cleanup(func() {
		if p.srv != nil {
			p.down()
		}
		p.forward.CloseIdleConnections()
	})
	return p
}

// released is closed when the stalls of the current listening period end.
func (p *apiProxy) released() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.release
}

func (p *apiProxy) start(addr string) {
	rp := httputil.NewSingleHostReverseProxy(p.target)
	rp.Transport = p.forward
	p.mu.Lock()
	p.release = make(chan struct{})
	p.mu.Unlock()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch fault(p.fault.Load()) {
		case status503:
			http.Error(w, "etcd leader changed", http.StatusServiceUnavailable)
		case status429:
			http.Error(w, "too many requests", http.StatusTooManyRequests)
		case hangUp:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		case stall:
			// Read the request to its end first: only then does the
			// server watch the connection, and cancel r.Context() when
			// the client hangs up; a handler waiting on it unread would
			// wait forever, and Close with it.
			_, _ = io.Copy(io.Discard, r.Body)
			timer := time.NewTimer(maxStall)
			defer timer.Stop()
			select {
			case <-r.Context().Done():
			case <-p.released():
			case <-timer.C:
				p.t.Errorf("a stalled request was still open after %v", maxStall)
			}
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	srv.Listener.Close()
	ln, err := net.Listen("tcp", addr)
	require.NoError(p.t, err)
	srv.Listener = ln
	srv.StartTLS()
	p.srv = srv
}

// down stops listening: connections are refused. It stops accepting first,
// then ends stalled handlers and closes every client connection, so Close
// has nothing left to wait on.
func (p *apiProxy) down() {
	p.srv.Listener.Close()
	p.mu.Lock()
	close(p.release)
	p.mu.Unlock()
	p.srv.CloseClientConnections()
	p.srv.Close()
	p.srv = nil
}

// up listens again on the same address.
func (p *apiProxy) up() { p.start(p.addr) }

// TestNodeIdentityAPIServerOutage: while the API server cannot answer a
// TokenReview (connection refused, hung up, 503, 429, no answer before the
// request's deadline) the node collector's records are not lost: the whole
// request comes back with a retryable error (the otlp receiver returns a
// non-permanent error as gRPC Unavailable, which the node's exporter
// retries), counted review_unavailable and never invalid_token, and no
// failure is cached: once the API server answers again the same token's
// records pass.
func TestNodeIdentityAPIServerOutage(t *testing.T) {
	l := newLab(t)
	proxy := newAPIProxy(t, l.cp.URL)
	p, sink, tel := l.gateway(func(cfg *Config) {
		// The gateway reaches the API server through the proxy.
		kc, err := os.ReadFile(cfg.KubeConfig)
		require.NoError(t, err)
		path := cfg.KubeConfig + ".proxied"
		require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(kc), l.cp.URL, "https://"+proxy.addr)), 0o600))
		cfg.KubeConfig = path
	})
	tok := l.token("flowtel", "flowtel-node", defaultAudience, l.pod)
	own := record{"node-a", "node-a"}

	for _, tc := range []struct {
		name  string
		fault fault
		down  bool
	}{
		{"connection refused", pass, true},
		{"hung up", hangUp, false},
		{"503", status503, false},
		{"429", status429, false},
		{"timeout", stall, false},
	} {
		proxy.fault.Store(int32(tc.fault))
		if tc.down {
			proxy.down()
		}
		before := counter(t, tel, refused, "review_unavailable")
		ctx, cancel := context.WithTimeout(sent(t, tok), 2*time.Second)
		err := p.ConsumeLogs(ctx, logs("node-a", own, own, own))
		cancel()
		require.Error(t, err, tc.name)
		assert.False(t, consumererror.IsPermanent(err), "%s: %v must be retryable", tc.name, err)
		assert.Equal(t, int64(3), counter(t, tel, refused, "review_unavailable")-before, "%s: counted review_unavailable", tc.name)
		t.Logf("%s: %v", tc.name, err)
		if tc.down {
			proxy.up()
		}
	}
	assert.Zero(t, counter(t, tel, refused, "invalid_token"), "an outage is not a bad token")
	assert.Zero(t, sink.LogRecordCount())

	// The API server answers again: the records the sender sends again pass.
	proxy.fault.Store(int32(pass))
	require.NoError(t, p.ConsumeLogs(sent(t, tok), logs("node-a", own, own, own)))
	assert.Equal(t, 3, sink.LogRecordCount())
	assert.Equal(t, int64(3), counter(t, tel, accepted, ""))
}
