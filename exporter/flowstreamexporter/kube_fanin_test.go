//go:build integration

package flowstreamexporter

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
)

// startFanIn runs the fan-in's pipeline in front of c's exporter: an OTLP
// receiver whose records go to the exporter running at the time. It returns
// the receiver's endpoint.
func startFanIn(t *testing.T, c *cluster) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = addr
	cfg.Protocols.HTTP = configoptional.None[otlpreceiver.HTTPConfig]()
	set := receivertest.NewNopSettings(factory.Type())
	set.ID = component.NewIDWithName(factory.Type(), "fanin")
	next, err := consumer.NewLogs(func(ctx context.Context, ld plog.Logs) error { return c.exp.ConsumeLogs(ctx, ld) })
	require.NoError(t, err)
	rcv, err := factory.CreateLogs(context.Background(), set, cfg, next)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, rcv.Shutdown(context.Background())) })
	return addr
}

// gateway exports records to the fan-in over OTLP, as a gateway replica does.
type gateway struct {
	name string
	conn *grpc.ClientConn
	n    int
}

func newGateway(t *testing.T, name, fanIn string) *gateway {
	t.Helper()
	conn, err := grpc.NewClient(fanIn, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &gateway{name: name, conn: conn}
}

// export sends n records of ns-a, keyed <gateway>-<i>, and returns their keys.
func (g *gateway) export(t *testing.T, n int) []string {
	t.Helper()
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	var keys []string
	for range n {
		r := podRecord("ns-a", "web", "ns-b", "api")
		r.Key = fmt.Sprintf("%s-%d", g.name, g.n)
		g.n++
		attrcodec.Encode(r, lrs.AppendEmpty())
		keys = append(keys, r.Key)
	}
	_, err := plogotlp.NewGRPCClient(g.conn).Export(context.Background(), plogotlp.NewExportRequestFromLogs(ld))
	require.NoError(t, err)
	return keys
}

// The fan-in merges every gateway replica's records into one ring, so one
// token resumes the merged stream: what any gateway sent after it, once,
// whichever gateway restarted meanwhile; only the fan-in's own restart
// starts it over.
func TestResumeThroughTheFanIn(t *testing.T) {
	c := startCluster(t)
	fanIn := startFanIn(t, c)
	g1, g2 := newGateway(t, "gw1", fanIn), newGateway(t, "gw2", fanIn)
	tok := tokenCred(c.serviceAccount(t, "team", "viewer", map[string][]string{flowViewer: {"ns-a"}}))
	req := func(resume *pb.ResumeToken) *pb.GetFlowsRequest {
		return &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Resume: resume}
	}

	want := append(g1.export(t, 2), g2.export(t, 2)...)
	next := c.follow(t, tok, req(nil))
	_, err := next() // info
	require.NoError(t, err)
	var got []string
	var last *pb.ResumeToken
	for len(got) < len(want) {
		resp, err := next()
		require.NoError(t, err)
		got = append(got, ids(resp.Flows)...)
		last = resp.ResumeToken
	}
	require.Equal(t, want, got)

	// The client is away; both gateways go on, one of them restarting.
	missed := g1.export(t, 1)
	g2 = newGateway(t, "gw2-restarted", fanIn)
	missed = append(missed, g2.export(t, 2)...)
	missed = append(missed, g1.export(t, 1)...)
	flows, err := c.open(t, tok, req(last))
	require.NoError(t, err)
	require.Equal(t, missed, ids(flows), "every gateway's records after the token, once, in the order the fan-in took them")

	// The fan-in restarts: its ring is new, the token is of the old epoch.
	c.restart(t)
	fresh := g2.export(t, 1)
	next = c.follow(t, tok, req(last))
	hello, err := next()
	require.NoError(t, err)
	require.True(t, hello.ResumeReset)
	resp, err := next()
	require.NoError(t, err)
	require.Equal(t, fresh, ids(resp.Flows))
}
