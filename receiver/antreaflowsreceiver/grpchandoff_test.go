package antreaflowsreceiver

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// portFlows are n agent flows, one per request as the agent sends them,
// told apart by their source ports (from 10 000 up).
func portFlows(n int) []*pb.Flow {
	flows := make([]*pb.Flow, n)
	for i := range flows {
		src, _ := interNodeHalves(uint16(10000 + i))
		flows[i] = toFlow(&src)
	}
	return flows
}

// openExport opens a plaintext FlowExportService stream that the test closes.
func openExport(t *testing.T, addr string) pb.FlowExportService_ExportClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := pb.NewFlowExportServiceClient(conn).Export(ctx)
	require.NoError(t, err)
	return stream
}

func sendFlows(t *testing.T, stream pb.FlowExportService_ExportClient, flows []*pb.Flow) {
	t.Helper()
	for _, f := range flows {
		require.NoError(t, stream.Send(&pb.ExportRequest{Flows: []*pb.Flow{f}}))
	}
}

// handOffSizes are the records of each hand-off the sink took.
func handOffSizes(sink *consumertest.LogsSink) []int {
	var sizes []int
	for _, l := range sink.AllLogs() {
		sizes = append(sizes, l.LogRecordCount())
	}
	return sizes
}

func assertPortOrder(t *testing.T, batches []plog.Logs, n int) {
	t.Helper()
	got, _ := records(t, batches)
	require.Len(t, got, n)
	for i, r := range got {
		require.Equal(t, uint16(10000+i), r.Source.Port, "record %d", i)
	}
}

// TestGRPCHandOffGathersRequests: 2 500 requests of one flow each on one
// stream reach the next consumer in three hand-offs (the records bound,
// 1 000, twice, and the rest when the agent closes the stream), every record
// once and in order; and the stream's ExportResponse, the agent's only
// acknowledgement, comes after the last of them was handed on.
func TestGRPCHandOffGathersRequests(t *testing.T) {
	withHandOff(t, 1000, time.Hour)
	s := startReceiver(t, nil)
	require.NoError(t, exportGRPC(t, s.cfg.GRPC.Endpoint, nil, portFlows(2500)...))

	assert.Equal(t, []int{1000, 1000, 500}, handOffSizes(s.sink), "handed on before the response")
	assertPortOrder(t, s.sink.AllLogs(), 2500)
	assert.Equal(t, int64(2500), s.counter(t, "otelcol_receiver_antrea_flows_records_emitted", "", ""))
}

// TestGRPCHandOffDue: records that wait for more are handed on at the latest
// the delay after the first arrived, the stream still open and silent; the
// stream then goes on being read.
func TestGRPCHandOffDue(t *testing.T) {
	withHandOff(t, 1000, 50*time.Millisecond)
	s := startReceiver(t, nil)
	stream := openExport(t, s.cfg.GRPC.Endpoint)
	flows := portFlows(6)
	for _, part := range [][]*pb.Flow{flows[:3], flows[3:]} {
		start := time.Now()
		sendFlows(t, stream, part)
		waitRecords(t, s.sink, s.sink.LogRecordCount()+3)
		assert.Less(t, time.Since(start), 5*time.Second)
	}
	assert.Equal(t, []int{3, 3}, handOffSizes(s.sink))
	_, err := stream.CloseAndRecv()
	require.NoError(t, err)
	assertPortOrder(t, s.sink.AllLogs(), 6)
}

// TestGRPCHandOffAtShutdown: records of an open stream still waiting for
// their hand-off when the receiver shuts down are handed on before Shutdown
// returns (it waits for the stream's handler): none is lost.
func TestGRPCHandOffAtShutdown(t *testing.T) {
	withHandOff(t, 1000, time.Hour)
	s := startReceiver(t, nil)
	stream := openExport(t, s.cfg.GRPC.Endpoint)
	sendFlows(t, stream, portFlows(10))
	require.Eventually(t, func() bool {
		return s.counter(t, "otelcol_receiver_antrea_flows_records_received", "transport", "grpc") == 10
	}, 10*time.Second, 10*time.Millisecond, "the receiver read the 10 records")
	assert.Zero(t, s.sink.LogRecordCount(), "waiting for more")

	require.NoError(t, s.r.Shutdown(context.Background()))
	assert.Equal(t, []int{10}, handOffSizes(s.sink))
	assertPortOrder(t, s.sink.AllLogs(), 10)
	assert.Equal(t, int64(10), s.counter(t, "otelcol_receiver_antrea_flows_records_emitted", "", ""))
}

// TestGRPCHandOffBackPressure: while the next consumer holds a hand-off, the
// stream is not read further than one request: the records received stop at
// the hand-off's bound, and gRPC's flow control stops the agent's sends
// (requests of 1 MiB, far more than any flow-control window); once the
// consumer takes them, everything arrives, in order.
func TestGRPCHandOffBackPressure(t *testing.T) {
	withHandOff(t, 10, time.Hour)
	sink := new(consumertest.LogsSink)
	release := make(chan struct{})
	releaseAll := sync.OnceFunc(func() { close(release) })
	next, err := consumer.NewLogs(func(ctx context.Context, ld plog.Logs) error {
		<-release
		return sink.ConsumeLogs(ctx, ld)
	})
	require.NoError(t, err)
	s := startReceiverTo(t, next, nil)
	t.Cleanup(releaseAll) // before the receiver's Shutdown, which waits for the hand-off
	stream := openExport(t, s.cfg.GRPC.Endpoint)

	const n = 40
	flows := portFlows(n)
	for _, f := range flows {
		f.Id = strings.Repeat("x", 1<<20) // not read from an agent
	}
	var sent atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, f := range flows {
			if stream.Send(&pb.ExportRequest{Flows: []*pb.Flow{f}}) != nil {
				return
			}
			sent.Add(1)
		}
	}()
	require.Eventually(t, func() bool {
		return s.counter(t, "otelcol_receiver_antrea_flows_records_received", "transport", "grpc") == 10
	}, 10*time.Second, 10*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, int64(10), s.counter(t, "otelcol_receiver_antrea_flows_records_received", "transport", "grpc"),
		"read no further while the consumer holds the hand-off")
	assert.Less(t, sent.Load(), int64(n), "the agent's sends are held back")

	releaseAll()
	wg.Wait()
	_, err = stream.CloseAndRecv()
	require.NoError(t, err)
	assert.Equal(t, []int{10, 10, 10, 10}, handOffSizes(sink))
	assertPortOrder(t, sink.AllLogs(), n)
}
