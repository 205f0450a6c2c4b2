package flowstreamexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// resumeFrom runs serve from where tok says (as GetFlows does) until it
// returns, and returns its responses and whether the token was reset.
func resumeFrom(t *testing.T, r *ring, req *pb.GetFlowsRequest, tok *pb.ResumeToken) ([]*pb.GetFlowsResponse, bool) {
	t.Helper()
	req.Resume = tok
	q, err := parseRequest(req)
	require.NoError(t, err)
	from, reset, err := r.start(q.resume)
	require.NoError(t, err)
	var out []*pb.GetFlowsResponse
	require.NoError(t, serve(context.Background(), r, q, &viewer{scope: q.scope}, time.Minute, from, func(resp *pb.GetFlowsResponse, _ uint64) error {
		out = append(out, resp)
		return nil
	}))
	return out, reset
}

// ports are the source ports of flows, which pushRecords numbers from 1000.
func ports(flows []*pb.Flow) []uint32 {
	var out []uint32
	for _, f := range flows {
		out = append(out, f.Transport.SourcePort-1000)
	}
	return out
}

func seqs(resps []*pb.GetFlowsResponse, epoch string, t *testing.T) []int64 {
	var out []int64
	for _, r := range resps {
		require.Equal(t, epoch, r.ResumeToken.GetStreamEpoch())
		out = append(out, r.ResumeToken.GetSequenceNumber())
	}
	return out
}

func TestResumeTokenOnEveryResponse(t *testing.T) {
	r := newRing(1000)
	pushRecords(r, 250, t0)
	resps, reset := resumeFrom(t, r, &pb.GetFlowsRequest{ClusterWide: true}, nil)
	require.False(t, reset)
	require.Equal(t, []int64{99, 199, 249}, seqs(resps, r.epoch, t), "the last record each response accounts for")
	require.Len(t, r.epoch, 24)
	require.NotEqual(t, r.epoch, newRing(1).epoch, "a new ring is a new epoch")
}

func TestResumeContinuesAfterTheToken(t *testing.T) {
	r := newRing(1000)
	pushRecords(r, 10, t0)
	resps, _ := resumeFrom(t, r, &pb.GetFlowsRequest{ClusterWide: true, MaxCount: 4}, nil)
	require.Equal(t, []uint32{0, 1, 2, 3}, ports(flowsOf(resps)))
	tok := resps[len(resps)-1].ResumeToken
	require.Equal(t, int64(3), tok.SequenceNumber, "max_count ends the stream mid-batch: the token stops at the last record sent")

	pushRecords(r, 2, t0) // while the client was away
	resps, reset := resumeFrom(t, r, &pb.GetFlowsRequest{ClusterWide: true}, tok)
	require.False(t, reset)
	flows := flowsOf(resps)
	require.Equal(t, []uint32{4, 5, 6, 7, 8, 9, 0, 1}, ports(flows), "every record after the token, once")
	require.Zero(t, resps[len(resps)-1].DroppedCount)

	// Resuming at the newest record: nothing to send, and not an error.
	last := resps[len(resps)-1].ResumeToken
	require.Equal(t, int64(11), last.SequenceNumber)
	resps, _ = resumeFrom(t, r, &pb.GetFlowsRequest{ClusterWide: true}, last)
	require.Empty(t, resps)
}

func TestResumeCountsWhatFellOutOfTheRing(t *testing.T) {
	r := newRing(8)
	pushRecords(r, 5, t0)
	resps, _ := resumeFrom(t, r, &pb.GetFlowsRequest{ClusterWide: true, MaxCount: 3}, nil)
	tok := resps[len(resps)-1].ResumeToken // accounts for records 0-2
	pushRecords(r, 10, t0)                 // 15 written, 7-14 held
	resps, reset := resumeFrom(t, r, &pb.GetFlowsRequest{ClusterWide: true}, tok)
	require.False(t, reset)
	require.Equal(t, uint64(4), resps[0].DroppedCount, "records 3-6 were overwritten before the stream came back")
	require.Len(t, flowsOf(resps), 8)
	require.Equal(t, int64(14), resps[len(resps)-1].ResumeToken.SequenceNumber)

	// -1 (nothing seen yet) on a ring that has wrapped: everything overwritten counts.
	resps, _ = resumeFrom(t, r, &pb.GetFlowsRequest{ClusterWide: true}, &pb.ResumeToken{StreamEpoch: r.epoch, SequenceNumber: -1})
	require.Equal(t, uint64(7), resps[0].DroppedCount)
}

func TestResumeFromAnotherEpochStartsOver(t *testing.T) {
	r := newRing(8)
	pushRecords(r, 12, t0) // 4-11 held
	resps, reset := resumeFrom(t, r, &pb.GetFlowsRequest{ClusterWide: true}, &pb.ResumeToken{StreamEpoch: "restarted", SequenceNumber: 5000})
	require.True(t, reset, "a restarted server's token is not an error")
	require.Equal(t, []uint32{4, 5, 6, 7, 8, 9, 10, 11}, ports(flowsOf(resps)), "from the oldest record held")
	require.Zero(t, resps[0].DroppedCount, "the gap's size is unknown, not counted")
	require.Equal(t, int64(11), resps[len(resps)-1].ResumeToken.SequenceNumber)
	require.Equal(t, r.epoch, resps[0].ResumeToken.StreamEpoch)
}

func TestResumeBeyondThePositionIsInvalid(t *testing.T) {
	r := newRing(8)
	from, reset, err := r.start(&pb.ResumeToken{StreamEpoch: r.epoch, SequenceNumber: -1})
	require.NoError(t, err, "an empty ring: -1 is its only valid position")
	require.Equal(t, uint64(0), from)
	require.False(t, reset)
	_, _, err = r.start(&pb.ResumeToken{StreamEpoch: r.epoch, SequenceNumber: 0})
	require.Equal(t, codes.InvalidArgument, status.Code(err))

	pushRecords(r, 3, t0)
	from, _, err = r.start(&pb.ResumeToken{StreamEpoch: r.epoch, SequenceNumber: 2})
	require.NoError(t, err, "the newest record")
	require.Equal(t, uint64(3), from)
	for _, seq := range []int64{3, 1 << 40} {
		_, _, err = r.start(&pb.ResumeToken{StreamEpoch: r.epoch, SequenceNumber: seq})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%d", seq)
		require.ErrorContains(t, err, "resume.sequence_number: ")
		require.ErrorContains(t, err, "at or beyond this stream's position (3 records written")
	}
	_, _, err = r.start(&pb.ResumeToken{StreamEpoch: r.epoch, SequenceNumber: -2})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
}

// A stream whose scope or filters pass over records still moves its token,
// without a response per record.
func TestResumeTokenAdvancesPastRecordsNotSent(t *testing.T) {
	r := newRing(64)
	pushRecords(r, 20, t0) // ns-a → ns-b
	resps, _ := resumeFrom(t, r, &pb.GetFlowsRequest{Namespaces: []string{"ns-z"}}, nil)
	require.Empty(t, resps, "less than half a ring passed over: nothing sent")

	pushRecords(r, 40, t0)
	resps, _ = resumeFrom(t, r, &pb.GetFlowsRequest{Namespaces: []string{"ns-z"}}, nil)
	require.Len(t, resps, 1, "half a ring passed over: the token alone")
	require.Empty(t, resps[0].Flows)
	require.Equal(t, int64(59), resps[0].ResumeToken.SequenceNumber)

	// Records that match are sent as soon as they come, whatever the ring size.
	rec := podRecord("ns-z", "web", "ns-b", "api")
	r.push([]entry{makeEntry(rec)})
	resps, _ = resumeFrom(t, r, &pb.GetFlowsRequest{Namespaces: []string{"ns-z"}}, resps[0].ResumeToken)
	require.Len(t, flowsOf(resps), 1)
	require.Equal(t, int64(60), resps[0].ResumeToken.SequenceNumber)
}

// A follower's tokens keep up with live records.
func TestResumeTokenWhileFollowing(t *testing.T) {
	r := newRing(100)
	pushRecords(r, 2, t0)
	q, err := parseRequest(&pb.GetFlowsRequest{ClusterWide: true, Follow: true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *pb.GetFlowsResponse, 10)
	go func() {
		_ = serve(ctx, r, q, &viewer{scope: q.scope}, time.Minute, r.oldest(), func(resp *pb.GetFlowsResponse, _ uint64) error {
			got <- resp
			return nil
		})
	}()
	require.Equal(t, int64(1), (<-got).ResumeToken.SequenceNumber)
	pushRecords(r, 3, t0)
	require.Equal(t, int64(4), (<-got).ResumeToken.SequenceNumber)
}
