//go:build integration

package flowstreamexporter

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// Resume over the wire, through authentication and authorization, across a
// restart of the exporter.
func TestResumeOverTheWire(t *testing.T) {
	c := startCluster(t)
	recs := testRecords()
	c.push(t, recs["ab"], recs["bc"], recs["denied"]) // sequence numbers 0, 1, 2
	tok := tokenCred(c.serviceAccount(t, "team", "resumer", map[string][]string{flowViewer: {"ns-a"}}))
	nsA := func(resume *pb.ResumeToken) *pb.GetFlowsRequest {
		return &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Resume: resume}
	}

	next := c.follow(t, tok, nsA(nil))
	hello, err := next()
	require.NoError(t, err)
	require.Equal(t, []string{"ns-a"}, hello.Info.GetAuthorizedNamespaces())
	require.Equal(t, int64(-1), hello.ResumeToken.GetSequenceNumber(), "the first response: nothing accounted for yet")
	epoch := hello.ResumeToken.GetStreamEpoch()
	require.NotEmpty(t, epoch)
	require.False(t, hello.ResumeReset)
	resp, err := next()
	require.NoError(t, err)
	require.Equal(t, []string{"ab", "denied"}, ids(resp.Flows))
	require.True(t, proto.Equal(&pb.ResumeToken{StreamEpoch: epoch, SequenceNumber: 2}, resp.ResumeToken), "bc, out of scope, accounted for too: %v", resp.ResumeToken)
	mid := &pb.ResumeToken{StreamEpoch: epoch, SequenceNumber: 0} // as if the client had seen ab only

	// Another client resumes: exactly what came after its token.
	c.push(t, recs["ext"]) // 3
	next = c.follow(t, tok, nsA(resp.ResumeToken))
	hello, err = next()
	require.NoError(t, err)
	require.True(t, proto.Equal(resp.ResumeToken, hello.ResumeToken), "the first response echoes where the stream resumes: %v", hello.ResumeToken)
	require.False(t, hello.ResumeReset)
	resp, err = next()
	require.NoError(t, err)
	require.Equal(t, []string{"ext"}, ids(resp.Flows))
	require.Zero(t, resp.DroppedCount)
	flows, err := c.open(t, tok, nsA(mid))
	require.NoError(t, err)
	require.Equal(t, []string{"denied", "ext"}, ids(flows))

	// A client built from Antrea's proto, over gRPC through authorization:
	// StreamInfo (3) on the first response only, as Antrea means it; the
	// token every response carries is not read as StreamInfo.
	antrea := loadAntreaSchema(t)
	resps := antreaOpen(t, c, tok, antrea, "ns-a")
	var antreaIDs []string
	for i, m := range resps {
		ns, cw, ok := antrea.info(m)
		if i == 0 {
			require.True(t, ok, "the first response carries StreamInfo")
			require.Equal(t, []string{"ns-a"}, ns)
			require.False(t, cw)
		} else {
			require.False(t, ok, "response %d: StreamInfo is on the first response only, got %q %v", i, ns, cw)
		}
		list := m.Get(antrea.field(antrea.response, "flows")).List()
		for j := 0; j < list.Len(); j++ {
			f := list.Get(j).Message()
			antreaIDs = append(antreaIDs, f.Get(f.Descriptor().Fields().ByName("id")).String())
		}
	}
	require.Equal(t, []string{"ab", "denied", "ext"}, antreaIDs)

	_, err = c.open(t, tok, nsA(&pb.ResumeToken{StreamEpoch: epoch, SequenceNumber: 4}))
	requireCode(t, err, codes.InvalidArgument, "resume.sequence_number: 4 is at or beyond this stream's position (4 records written")
	_, err = c.open(t, tok, nsA(&pb.ResumeToken{SequenceNumber: 1}))
	requireCode(t, err, codes.InvalidArgument, "resume.stream_epoch: must not be empty")
	// Authorization comes first: a caller without a grant learns nothing of the position.
	stranger := tokenCred(c.serviceAccount(t, "team", "stranger", nil))
	_, err = c.open(t, stranger, nsA(&pb.ResumeToken{StreamEpoch: epoch, SequenceNumber: 99}))
	requireCode(t, err, codes.PermissionDenied, "may not list flows")

	// The exporter restarts: the old epoch's token starts the new ring over.
	c.restart(t)
	c.push(t, recs["ab"])
	next = c.follow(t, tok, nsA(&pb.ResumeToken{StreamEpoch: epoch, SequenceNumber: 3}))
	hello, err = next()
	require.NoError(t, err)
	require.True(t, hello.ResumeReset, "a token of another epoch is not an error")
	require.NotEqual(t, epoch, hello.ResumeToken.GetStreamEpoch())
	require.Equal(t, int64(-1), hello.ResumeToken.GetSequenceNumber())
	resp, err = next()
	require.NoError(t, err)
	require.Equal(t, []string{"ab"}, ids(resp.Flows), "from the oldest record of the new ring")
	require.Zero(t, resp.DroppedCount)
	require.False(t, resp.ResumeReset, "said once, on the first response")

	// Counted: two resumes in the first epoch, one reset after the restart;
	// the refused tokens are streams_rejected, not resumes.
	m, err := c.tel.GetMetric("otelcol_exporter_flow_stream_resumes")
	require.NoError(t, err)
	got := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value("outcome")
		got[v.AsString()] += dp.Value
	}
	require.Equal(t, map[string]int64{"resumed": 2, "reset": 1}, got)
}

// antreaOpen opens a history stream as an Antrea client does: Antrea's
// method name, a request encoded with Antrea's schema, each response decoded
// with it.
func antreaOpen(t *testing.T, c *cluster, cred credential, s *antreaSchema, namespace string) []*dynamicpb.Message {
	t.Helper()
	req := dynamicpb.NewMessage(s.request)
	req.Mutable(s.field(s.request, "namespaces")).List().Append(protoreflect.ValueOfString(namespace))
	ctx, cancel := context.WithCancel(withToken(context.Background(), cred))
	defer cancel()
	st, err := c.conn(t, cred).NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/antrea_io.antrea.pkg.apis.flow.v1alpha1.FlowStreamService/GetFlows")
	require.NoError(t, err)
	require.NoError(t, st.SendMsg(req))
	require.NoError(t, st.CloseSend())
	var out []*dynamicpb.Message
	for {
		m := dynamicpb.NewMessage(s.response)
		err := st.RecvMsg(m)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, m)
	}
}
