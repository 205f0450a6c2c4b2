package antreaflowsreceiver

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/benchcpu"
	"github.com/flowtel/flowtel/receiver/antreaflowsreceiver/internal/metadata"
	"github.com/flowtel/flowtel/testbed/antreaagent"
)

// BenchmarkReceive: records per CPU-second of the whole process, the
// receiver decoding one agent's export into record halves (to a consumer
// that counts them). The agent's side is prepared before the clock starts
// and costs little: the exact bytes go-ipfix's exporting process writes
// (Antrea's IPv4 agent template, one record per message) replayed on one TCP
// connection, and ExportRequests of one flow each marshalled in advance and
// written on one gRPC stream as they are.
func BenchmarkReceive(b *testing.B) {
	src, _ := interNodeHalves(43512)
	b.Run("transport=ipfix_tcp", func(b *testing.B) {
		tmpl, data := agentMessages(b, &src)
		n := &counting{}
		r := startBench(b, n)
		conn, err := net.Dial("tcp", r.cfg.IPFIX.Endpoint)
		require.NoError(b, err)
		defer conn.Close()
		_, err = conn.Write(tmpl)
		require.NoError(b, err)
		const perWrite = 64
		burst := make([]byte, 0, perWrite*len(data))
		for range perWrite {
			burst = append(burst, data...)
		}
		measure(b, n, perWrite, func() { _, _ = conn.Write(burst) })
	})
	b.Run("transport=grpc", func(b *testing.B) {
		req, err := proto.Marshal(&pb.ExportRequest{Flows: []*pb.Flow{toFlow(&src)}})
		require.NoError(b, err)
		n := &counting{}
		r := startBench(b, n)
		cc, err := grpc.NewClient(r.cfg.GRPC.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
		require.NoError(b, err)
		defer cc.Close()
		stream, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true}, pb.FlowExportService_Export_FullMethodName)
		require.NoError(b, err)
		measure(b, n, 1, func() { _ = stream.SendMsg(req) })
		_ = stream.CloseSend()
	})
}

// measure runs send b.N/perSend times (each sending perSend records) and
// waits until every record reached the consumer.
func measure(b *testing.B, n *counting, perSend int, send func()) {
	b.ReportAllocs()
	cpu0, t0 := benchcpu.Now(), time.Now()
	sends := max(1, b.N/perSend)
	for range sends {
		send()
	}
	want := int64(sends * perSend)
	deadline := time.Now().Add(time.Minute)
	for n.records.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.Equal(b, want, n.records.Load())
	cpu, wall := benchcpu.Now()-cpu0, time.Since(t0)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(want), "cpu-ns/record")
	b.ReportMetric(float64(want)/cpu.Seconds(), "records/cpu-s")
	b.ReportMetric(float64(want)/wall.Seconds(), "records/s")
}

type counting struct{ records atomic.Int64 }

func (c *counting) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (c *counting) ConsumeLogs(_ context.Context, l plog.Logs) error {
	c.records.Add(int64(l.LogRecordCount()))
	return nil
}

func startBench(b *testing.B, next consumer.Logs) *antreaReceiver {
	cfg := createDefaultConfig()
	cfg.IPFIX.Endpoint, cfg.IPFIX.Transports = freeAddr(b, "tcp"), []string{transportTCP}
	cfg.GRPC.Endpoint = freeAddr(b, "tcp")
	set := receivertest.NewNopSettings(metadata.Type)
	rcv, err := NewFactory().CreateLogs(context.Background(), set, cfg, next)
	require.NoError(b, err)
	require.NoError(b, rcv.Start(context.Background(), componenttest.NewNopHost()))
	b.Cleanup(func() { require.NoError(b, rcv.Shutdown(context.Background())) })
	return rcv.(*antreaReceiver)
}

// agentMessages captures what an agent's exporting process writes: its
// template messages, then one data message carrying r.
func agentMessages(b *testing.B, r *agentRecord) (templates, data []byte) {
	all, err := antreaagent.Capture("node-a", func(a *antreaagent.Agent) error {
		(&agent{a}).send(b, r)
		return nil
	})
	require.NoError(b, err)
	// The messages are framed by their headers: the last one is the record's.
	var msgs [][]byte
	for len(all) >= msgHeaderLen {
		n := int(all[2])<<8 | int(all[3])
		msgs, all = append(msgs, all[:n]), all[n:]
	}
	require.GreaterOrEqual(b, len(msgs), 2)
	for _, m := range msgs[:len(msgs)-1] {
		templates = append(templates, m...)
	}
	return templates, msgs[len(msgs)-1]
}

// rawCodec writes already-marshalled messages as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal([]byte, any) error   { return nil }
func (rawCodec) Name() string                  { return "proto" }
