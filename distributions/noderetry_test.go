package distributions

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	lb "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/otelcol/otelcoltest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// gatewayStub is an OTLP logs endpoint standing in for a gateway replica: it
// counts the records it took per flow.key and refuses the first `refuse`
// requests (Unavailable, as a replica that is restarting).
type gatewayStub struct {
	plogotlp.UnimplementedGRPCServer
	addr string

	mu     sync.Mutex
	refuse int
	taken  map[string]int
}

func startGatewayStub(t *testing.T, refuse int) *gatewayStub {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &gatewayStub{addr: l.Addr().String(), refuse: refuse, taken: map[string]int{}}
	s := grpc.NewServer()
	plogotlp.RegisterGRPCServer(s, g)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return g
}

func (g *gatewayStub) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refuse > 0 {
		g.refuse--
		return plogotlp.NewExportResponse(), status.Error(codes.Unavailable, "restarting")
	}
	rls := req.Logs().ResourceLogs()
	for i := range rls.Len() {
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			lrs := sls.At(j).LogRecords()
			for k := range lrs.Len() {
				key, _ := lrs.At(k).Attributes().Get("flow.key")
				g.taken[key.Str()]++
			}
		}
	}
	return plogotlp.NewExportResponse(), nil
}

func (g *gatewayStub) counts() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int, len(g.taken))
	for k, n := range g.taken {
		out[k] = n
	}
	return out
}

// TestNodeSendsEachRecordToItsReplicaOnce: with the node collector's shipped
// load_balancing settings, a batch whose records belong to two gateway
// replicas, one of which refuses for a while, reaches each replica with each
// of its records exactly once. Retrying the whole batch instead sent the
// other replica's part again with every retry; when that replica restarted in
// between (a rolling restart of the gateways), its new process counted those
// records a second time.
func TestNodeSendsEachRecordToItsReplicaOnce(t *testing.T) {
	t.Setenv("K8S_NODE_NAME", "node-1")
	t.Setenv("POD_NAMESPACE", "flowtel")
	factories, err := Factories(Node)
	require.NoError(t, err)
	shipped, err := otelcoltest.LoadConfig(Config(Node), factories)
	require.NoError(t, err)
	id := component.MustNewID("load_balancing")
	cfg, ok := shipped.Exporters[id].(*lb.Config)
	require.True(t, ok, "the node configuration has no load_balancing exporter")

	// The shipped settings, except where the stubs are and how they are
	// reached: plain gRPC on loopback, no storage extension for the queue.
	up, restarting := startGatewayStub(t, 0), startGatewayStub(t, 2)
	cfg.Resolver = lb.ResolverSettings{Static: configoptional.Some(lb.StaticResolver{Hostnames: []string{up.addr, restarting.addr}})}
	cfg.Protocol.OTLP.ClientConfig.TLS = configtls.ClientConfig{Insecure: true}
	cfg.Protocol.OTLP.ClientConfig.Auth = configoptional.None[configauth.Config]()
	require.True(t, cfg.QueueSettings.HasValue())
	cfg.QueueSettings.Get().StorageID = nil

	set := exportertest.NewNopSettings(id.Type())
	exp, err := factories.Exporters[id.Type()].CreateLogs(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()

	const records = 64
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := range records {
		lrs.AppendEmpty().Attributes().PutStr("flow.key", fmt.Sprintf("connection-%d", i))
	}
	require.NoError(t, exp.ConsumeLogs(context.Background(), ld))

	require.Eventually(t, func() bool {
		return len(up.counts())+len(restarting.counts()) == records
	}, 30*time.Second, 50*time.Millisecond, "not every record reached a replica")
	// Any further retry would have come by now (the shipped intervals start at 1 s).
	time.Sleep(3 * time.Second)
	a, b := up.counts(), restarting.counts()
	require.NotEmpty(t, a, "the test needs records for both replicas")
	require.NotEmpty(t, b, "the test needs records for both replicas")
	for key, n := range a {
		assert.Equal(t, 1, n, "%s sent %d times to the replica that took it at once", key, n)
		assert.NotContains(t, b, key, "%s sent to both replicas", key)
	}
	for key, n := range b {
		assert.Equal(t, 1, n, "%s sent %d times to the replica that refused at first", key, n)
	}
}
