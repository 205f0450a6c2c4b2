package antreaflowsreceiver

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// TestGRPCOversizeRequestCounted (issue 42.8): an ExportRequest over
// grpc.max_recv_msg_size ends its stream (gRPC's rule) with gRPC's
// ResourceExhausted error naming both sizes, and is counted
// (oversize_request).
func TestGRPCOversizeRequestCounted(t *testing.T) {
	s := startReceiver(t, func(c *Config) { c.GRPC.MaxRecvMsgSize = 1024 })
	r := intraNode()
	f := toFlow(&r)
	f.K8S.SourcePodName = strings.Repeat("p", 4096)
	err := exportGRPCRequest(t, s.cfg.GRPC.Endpoint, &pb.ExportRequest{Flows: []*pb.Flow{f}})
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.Regexp(t, `received message larger than max \(\d+ vs\. 1024\)`, err.Error())
	require.Eventually(t, func() bool {
		return s.counter(t, "otelcol_receiver_antrea_flows_refused", "reason", reasonOversizeRequest) == 1
	}, 5*time.Second, 10*time.Millisecond)

	// The next request within the bound is received.
	require.NoError(t, exportGRPCRequest(t, s.cfg.GRPC.Endpoint, &pb.ExportRequest{Flows: []*pb.Flow{toFlow(&r)}}))
	waitRecords(t, s.sink, 1)
}
