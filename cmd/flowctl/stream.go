package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// Reconnection backoff of a following stream: doubled per failed attempt.
const (
	firstRetry = 250 * time.Millisecond
	maxRetry   = 5 * time.Second
)

// gap is a stretch of the stream a client did not receive.
type gap struct {
	// Reason is "fell_behind" (the gateway's buffer overwrote records before
	// the stream read them), "disconnected" (the same, while flowctl was
	// reconnecting) or "server_restarted" (the gateway restarted: what it held
	// and flowctl had not received is gone, how much is unknown).
	Reason string `json:"reason"`
	// Lost is the number of records lost, counted before filters (so up to
	// that many flows); absent when unknown.
	Lost *uint64   `json:"lost,omitempty"`
	Time time.Time `json:"time"`
}

func (g gap) String() string {
	switch g.Reason {
	case "server_restarted":
		return "the flow stream restarted: flows it held that flowctl had not received are lost (how many is unknown); resuming from its oldest flow"
	case "disconnected":
		return fmt.Sprintf("up to %d flows lost while reconnecting: the gateway's buffer overwrote them", *g.Lost)
	}
	return fmt.Sprintf("up to %d flows lost: the stream fell behind the gateway's buffer", *g.Lost)
}

// reader reads a flow stream. With follow it does not end when the stream
// is lost (a gateway restart, a network cut): it reconnects and resumes after
// the last record it accounted for, so no flow is printed twice and every
// gap is reported.
type reader struct {
	sess   *session
	req    *pb.GetFlowsRequest
	stderr io.Writer
	gap    func(gap) error // besides stderr; nil: stderr only

	established bool            // a stream has answered once
	token       *pb.ResumeToken // where the stream is; nil until the server sends one
	received    uint64          // flows received, for max_count across reconnects
	failed      error           // each's or gap's error: it ends the read
	// continueSince, when set, is where the history the server bounded
	// (HistoryStatus.truncated) goes on: the next request's since.
	continueSince *timestamppb.Timestamp
}

// stream reads the stream once, without reconnecting (history reads).
func stream(ctx context.Context, sess *session, req *pb.GetFlowsRequest, stderr io.Writer, each func([]*pb.Flow) error) error {
	r := &reader{sess: sess, req: req, stderr: stderr}
	return r.run(ctx, each)
}

// run hands each batch of flows to each until the stream ends, ctx is done,
// or (with follow) an error that reconnecting cannot cure.
func (r *reader) run(ctx context.Context, each func([]*pb.Flow) error) error {
	var lost bool
	retry := firstRetry
	for {
		answered, err := r.once(ctx, each, lost)
		if next := r.continueSince; next != nil && err == nil && r.failed == nil && ctx.Err() == nil {
			// The server bounded the history: ask for the rest, a new
			// stream (not a resume: its token is the live part's).
			r.continueSince, r.token = nil, nil
			r.req.Since = next
			continue
		}
		switch {
		case r.failed != nil:
			return r.failed
		case ctx.Err() != nil:
			return nil // interrupted
		case answered:
			lost, retry = false, firstRetry
		}
		var cause string
		switch {
		case !r.req.Follow || !r.established:
			// A history read, or a stream never established: say why.
			if err == nil {
				return nil
			}
			return explain(err, r.sess.target)
		case r.req.MaxCount > 0 && r.received >= uint64(r.req.MaxCount):
			return nil
		case err == nil:
			cause = "the server ended it"
		case !transient(err):
			return explain(err, r.sess.target)
		default:
			cause = status.Convert(err).Message()
		}
		if !lost {
			lost = true
			fmt.Fprintf(r.stderr, "flowctl: stream lost (%s): reconnecting\n", cause)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
		retry = min(2*retry, maxRetry)
	}
}

// once opens one stream, resuming after r.token, and reads it to its end;
// it returns whether the server answered, and how the stream ended (nil:
// the server ended it).
func (r *reader) once(ctx context.Context, each func([]*pb.Flow) error, resuming bool) (bool, error) {
	ctx, cancel := context.WithCancel(ctx) // ends the stream when this returns early
	defer cancel()
	req := proto.Clone(r.req).(*pb.GetFlowsRequest)
	if r.token.GetStreamEpoch() != "" {
		req.Resume = r.token
	}
	if req.MaxCount > 0 {
		req.MaxCount -= uint32(r.received)
	}
	s, err := pb.NewFlowStreamServiceClient(r.sess.conn).GetFlows(r.sess.context(ctx), req)
	if err != nil {
		return false, err
	}
	var dropped uint64 // cumulative on each stream
	for i := 0; ; i++ {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return i > 0, nil
		}
		if err != nil {
			return i > 0, err
		}
		r.established = true
		if i == 0 && resuming {
			fmt.Fprintln(r.stderr, "flowctl: reconnected: resuming where the stream left off")
		}
		if resp.ResumeReset {
			r.report(gap{Reason: "server_restarted"})
		}
		if d := resp.DroppedCount; d > dropped {
			n := d - dropped
			reason := "fell_behind"
			if resuming && dropped == 0 && i <= 1 {
				reason = "disconnected" // counted by the resumed stream's first read
			}
			r.report(gap{Reason: reason, Lost: &n})
			dropped = d
		}
		if len(resp.Flows) > 0 && r.failed == nil {
			r.received += uint64(len(resp.Flows))
			r.failed = each(resp.Flows)
		}
		if r.failed != nil {
			return true, nil
		}
		if resp.ResumeToken != nil {
			r.token = resp.ResumeToken
		}
		if h := resp.History; h.GetTruncated() {
			fmt.Fprintf(r.stderr, "flowctl: the gateway bounded the history at %d rows: asking for the rest from %s\n",
				h.GetMaxRows(), h.GetContinueSince().AsTime().UTC().Format(time.RFC3339))
			r.continueSince = h.GetContinueSince()
		}
	}
}

// report tells of a gap on stderr and to r.gap.
func (r *reader) report(g gap) {
	g.Time = time.Now().UTC()
	fmt.Fprintf(r.stderr, "flowctl: %s\n", g)
	if r.gap != nil && r.failed == nil {
		r.failed = r.gap(g)
	}
}

// transient reports whether a lost stream may come back: the server or the
// network went away, or it is busy. An answer about the caller or the
// request (authentication, permission, invalid request) does not change by
// retrying.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Unknown, codes.Internal, codes.Aborted, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}
