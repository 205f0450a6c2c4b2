//go:build integration

package nodeidentityprocessor

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
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
type apiProxy struct {
	t       *testing.T
	target  *url.URL
	addr    string
	srv     *httptest.Server
	fault   atomic.Int32
	forward *http.Transport
}

func newAPIProxy(t *testing.T, apiURL string) *apiProxy {
	u, err := url.Parse(apiURL)
	require.NoError(t, err)
	p := &apiProxy{t: t, target: u, forward: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	p.start("127.0.0.1:0")
	p.addr = p.srv.Listener.Addr().String()
	t.Cleanup(func() {
		if p.srv != nil {
			p.srv.Close()
		}
		p.forward.CloseIdleConnections()
	})
	return p
}

func (p *apiProxy) start(addr string) {
	rp := httputil.NewSingleHostReverseProxy(p.target)
	rp.Transport = p.forward
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
			<-r.Context().Done()
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

// down stops listening: connections are refused.
func (p *apiProxy) down() {
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
		ctx, cancel := context.WithTimeout(sent(tok), 2*time.Second)
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
	require.NoError(t, p.ConsumeLogs(sent(tok), logs("node-a", own, own, own)))
	assert.Equal(t, 3, sink.LogRecordCount())
	assert.Equal(t, int64(3), counter(t, tel, accepted, ""))
}
