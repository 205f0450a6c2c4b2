package antreaflowsreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestGRPCExport: agents export over FlowExportService with TLS and client
// certificates, as Antrea's agents do; the halves arrive as over IPFIX, with
// the UIDs only gRPC carries.
func TestGRPCExport(t *testing.T) {
	p := newPKI(t)
	s := startReceiver(t, func(c *Config) { p.secure(c) })
	src, dst := interNodeHalves(43512)
	src.Source.PodUID, src.Source.NodeUID, src.Service.UID, src.EgressPolicy.UID = "uid-a", "uid-node-a", "uid-svc-web", "uid-acnp"
	dst.Destination.PodUID, dst.Destination.NodeUID, dst.IngressPolicy.UID = "uid-web", "uid-node-b", "uid-anp"
	creds := p.grpcTLS(t, p.clientCert, p.clientKey)
	require.NoError(t, exportGRPC(t, s.cfg.GRPC.Endpoint, creds, toFlow(&src)))
	require.NoError(t, exportGRPC(t, s.cfg.GRPC.Endpoint, creds, toFlow(&dst)))
	waitRecords(t, s.sink, 2)

	got, nodes := records(t, s.sink.AllLogs())
	require.Len(t, got, 2)
	assert.Equal(t, []string{"node-a", "node-b"}, nodes)
	want := wantInterNodeSource(43512)
	want.Source.PodUID, want.Source.NodeUID, want.Service.UID, want.EgressPolicy.UID = "uid-a", "uid-node-a", "uid-svc-web", "uid-acnp"
	assert.Equal(t, want, got[0], "the gRPC export time is the record's observed time")
	assert.Equal(t, "uid-web", got[1].Destination.PodUID)
	assert.Equal(t, "uid-node-b", got[1].Destination.NodeUID)
	assert.Equal(t, "uid-anp", got[1].IngressPolicy.UID)
	assert.Equal(t, flowrecord.SideDestination, got[1].Reporter.Side)
	assert.Equal(t, got[0].Key, got[1].Key)
	assert.Equal(t, int64(2), s.counter(t, "otelcol_receiver_antrea_flows_records_received", "transport", "grpc"))
}

// TestGRPCPlaintextRequestsKeepGood: without tls the server is plain gRPC
// (for a gateway behind a TLS-terminating proxy, and these tests); a bad
// flow in a request is refused alone, the request's other flows kept.
func TestGRPCBadFlowRefusedAlone(t *testing.T) {
	s := startReceiver(t, nil)
	good := intraNode()
	bad := toFlow(&good)
	bad.Ip.Source = []byte{10, 0, 0} // three bytes: no address
	noNode := intraNode()
	noNode.Source.NodeName, noNode.Destination.NodeName = "", ""
	conn := exportGRPCRequest(t, s.cfg.GRPC.Endpoint, &pb.ExportRequest{Flows: []*pb.Flow{bad, toFlow(&good), toFlow(&noNode)}})
	require.NoError(t, conn)
	waitRecords(t, s.sink, 1)
	assert.Equal(t, int64(1), s.counter(t, "otelcol_receiver_antrea_flows_refused", "reason", reasonMalformedRecord))
	assert.Equal(t, int64(1), s.counter(t, "otelcol_receiver_antrea_flows_refused", "reason", reasonNoNode))
	assert.Equal(t, int64(1), s.counter(t, "otelcol_receiver_antrea_flows_records_emitted", "", ""))
}
