package flowstreamexporter

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/exporter/flowstreamexporter/internal/metadata"
)

// batchSize is how many records one response carries at most.
const batchSize = 100

// service implements FlowStreamService.GetFlows.
type service struct {
	pb.UnimplementedFlowStreamServiceServer

	ring    *ring
	access  *access
	history *history // nil: no history configured
	limits  LimitsConfig
	recheck time.Duration
	logger  *zap.Logger
	tel     *metadata.TelemetryBuilder

	open    atomic.Int64
	mu      sync.Mutex
	perUser map[string]int
}

func (s *service) reject(ctx context.Context, err error) error {
	if st, ok := status.FromError(err); ok {
		var r string
		switch st.Code() {
		case codes.InvalidArgument:
			r = "invalid_argument"
		case codes.PermissionDenied:
			r = "permission_denied"
		case codes.ResourceExhausted:
			r = "resource_exhausted"
		case codes.Unauthenticated:
			r = "unauthenticated"
		case codes.Unavailable:
			r = "unavailable"
		default:
			return err
		}
		s.tel.ExporterFlowStreamStreamsRejected.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("reason", r)))
	}
	return err
}

// GetFlows authenticates the caller, validates the request, authorizes its
// scope, then streams history and (with follow) live records.
func (s *service) GetFlows(req *pb.GetFlowsRequest, stream pb.FlowStreamService_GetFlowsServer) error {
	ctx := stream.Context()
	if s.open.Add(1) > int64(s.limits.MaxStreams) {
		s.open.Add(-1)
		return s.reject(ctx, status.Errorf(codes.ResourceExhausted, "too many streams open (limits.max_streams %d): retry later", s.limits.MaxStreams))
	}
	defer s.open.Add(-1)

	u, err := s.access.authenticate(ctx)
	if err != nil {
		return s.reject(ctx, err)
	}
	if !s.acquire(u) {
		return s.reject(ctx, status.Errorf(codes.ResourceExhausted, "user %q has too many streams open (limits.max_streams_per_client %d): close one", u.name, s.limits.MaxStreamsPerClient))
	}
	defer s.release(u)

	q, err := parseRequest(req)
	if err != nil {
		return s.reject(ctx, err)
	}
	verb := verbList
	if q.follow {
		verb = verbWatch
	}
	if err := s.access.authorizeScope(ctx, u, q.scope, verb); err != nil {
		if errors.Is(err, errNoDecision) {
			// A new stream fails closed.
			return s.reject(ctx, status.Error(codes.Unavailable, "cannot authorize the stream now (Kubernetes API unreachable): retry"))
		}
		return s.reject(ctx, err)
	}

	s.tel.ExporterFlowStreamStreams.Add(ctx, 1)
	defer s.tel.ExporterFlowStreamStreams.Add(context.WithoutCancel(ctx), -1)

	from, reset, err := s.ring.start(q.resume)
	if err != nil {
		return s.reject(ctx, err)
	}
	if q.resume != nil {
		outcome := "resumed"
		if reset {
			outcome = "reset" // a token of another epoch: from the oldest record
		}
		s.tel.ExporterFlowStreamResumes.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
	}
	if err := stream.Send(firstResponse(q, s.ring.token(from), reset)); err != nil {
		return err
	}
	v := &viewer{access: s.access, user: u, scope: q.scope, verb: verb}
	if s.history != nil {
		done, err := s.serveHistory(ctx, q, v, from, reset, stream.Send)
		if err != nil {
			return s.reject(ctx, err)
		}
		if done {
			return nil
		}
	}
	err = serve(ctx, s.ring, q, v, s.recheck, from, func(resp *pb.GetFlowsResponse, dropped uint64) error {
		if dropped > 0 {
			s.tel.ExporterFlowStreamRecordsDropped.Add(ctx, int64(dropped))
		}
		if n := len(resp.Flows); n > 0 {
			s.tel.ExporterFlowStreamRecordsSent.Add(ctx, int64(n))
		}
		return stream.Send(resp)
	})
	if err != nil {
		return s.reject(ctx, err)
	}
	return nil
}

func (s *service) acquire(u *user) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perUser[u.name] >= s.limits.MaxStreamsPerClient {
		return false
	}
	s.perUser[u.name]++
	return true
}

func (s *service) release(u *user) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perUser[u.name]--; s.perUser[u.name] <= 0 {
		delete(s.perUser, u.name)
	}
}

// firstResponse says the stream is live: its scope in info (Antrea's
// StreamInfo, sent on this response only), where it starts and whether a
// resume fell back to the oldest record.
func firstResponse(q *query, tok *pb.ResumeToken, reset bool) *pb.GetFlowsResponse {
	info := &pb.StreamInfo{ClusterWide: q.scope.clusterWide}
	if !q.scope.clusterWide {
		info.AuthorizedNamespaces = []string{q.scope.namespace}
	}
	return &pb.GetFlowsResponse{Info: info, ResumeToken: tok, ResumeReset: reset}
}

// serveHistory sends the stream's history when its since is older than the
// ring's records, and prepares the live part's seam. done: the stream ends
// there (the server bounded the history, or max_count was reached).
func (s *service) serveHistory(ctx context.Context, q *query, v *viewer, from uint64, reset bool, send func(*pb.GetFlowsResponse) error) (done bool, err error) {
	oldest := ringOldestEnd(s.ring, from)
	if !needed(q, reset, oldest) {
		return false, nil
	}
	inRing := ringFingerprints(s.ring, from)
	part, err := s.history.serve(ctx, q, v, s.ring.token(from), inRing, oldest, func(resp *pb.GetFlowsResponse) error {
		if n := len(resp.Flows); n > 0 {
			s.tel.ExporterFlowStreamRecordsSent.Add(ctx, int64(n))
		}
		return send(resp)
	})
	if err != nil {
		return true, err
	}
	v.seam = part.skip
	if q.maxCount > 0 {
		if part.sent >= q.maxCount {
			return true, nil
		}
		q.maxCount -= part.sent
	}
	return part.status.GetTruncated(), nil
}
