package antreaflowsreceiver

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/senderauth"
)

// markSink records, per reporting Node, whether its records came marked as
// an authenticated Antrea agent's (what node_identity lets pass unchecked).
type markSink struct {
	mu     sync.Mutex
	marked map[string]bool
}

func (m *markSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (m *markSink) ConsumeLogs(ctx context.Context, l plog.Logs) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 0; i < l.ResourceLogs().Len(); i++ {
		v, _ := l.ResourceLogs().At(i).Resource().Attributes().Get("k8s.node.name")
		m.marked[v.Str()] = senderauth.IsAntreaAgent(ctx)
	}
	return nil
}

func (m *markSink) get(node string) (marked, seen bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	marked, seen = m.marked[node]
	return marked, seen
}

// TestAuthenticatedMark (issue 42.1): only records from a peer whose client
// certificate the client CA verified (IPFIX over TLS, gRPC over TLS) carry
// the authenticated-agent mark; UDP beside TLS (the explicit opt-out) and
// plaintext TCP and gRPC do not, so node_identity does not let them pass.
func TestAuthenticatedMark(t *testing.T) {
	p := newPKI(t)
	wait := func(t *testing.T, m *markSink, node string) bool {
		t.Helper()
		require.Eventually(t, func() bool { _, ok := m.get(node); return ok }, 10e9, 10e6, "no records of %s", node)
		marked, _ := m.get(node)
		return marked
	}
	t.Run("tls", func(t *testing.T) {
		m := &markSink{marked: map[string]bool{}}
		s := startReceiverTo(t, m, func(c *Config) {
			c.TLS = p.serverConfig()
			c.IPFIX.InsecureUDP = true
		})
		src, dst := interNodeHalves(43512)
		newAgent(t, s.cfg.IPFIX.Endpoint, "tcp", "node-a", p.exporterTLS(t, p.clientCert, p.clientKey)).send(t, &src)
		newAgent(t, s.cfg.IPFIX.Endpoint, "udp", "node-b", nil).send(t, &dst)
		assert.True(t, wait(t, m, "node-a"), "IPFIX over TLS with a verified client certificate")
		assert.False(t, wait(t, m, "node-b"), "UDP: anyone can send it")
		intra := intraNode()
		intra.Source.NodeName, intra.Destination.NodeName = "node-c", "node-c"
		require.NoError(t, exportGRPC(t, s.cfg.GRPC.Endpoint, p.grpcTLS(t, p.clientCert, p.clientKey), toFlow(&intra)))
		assert.True(t, wait(t, m, "node-c"), "gRPC over TLS with a verified client certificate")
	})
	t.Run("plaintext", func(t *testing.T) {
		m := &markSink{marked: map[string]bool{}}
		s := startReceiverTo(t, m, nil)
		src, dst := interNodeHalves(43512)
		newAgent(t, s.cfg.IPFIX.Endpoint, "tcp", "node-a", nil).send(t, &src)
		require.NoError(t, exportGRPC(t, s.cfg.GRPC.Endpoint, nil, toFlow(&dst)))
		assert.False(t, wait(t, m, "node-a"), "plaintext IPFIX over TCP")
		assert.False(t, wait(t, m, "node-b"), "plaintext gRPC")
	})
}
