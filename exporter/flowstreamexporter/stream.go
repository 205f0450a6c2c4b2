package flowstreamexporter

import (
	"context"
	"errors"
	"time"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// viewer is what one stream may see: its scope, and the tier of endpoints
// outside it.
type viewer struct {
	access *access // nil: every endpoint in full (tests of the stream alone)
	user   *user
	scope  scope
	verb   string
	// seam is what the live part leaves out, sent by the stream's history
	// (seam.go); nil without history.
	seam *liveSkip
}

func (v *viewer) tier(ctx context.Context, namespace string) tier {
	if v.access == nil || v.scope.clusterWide || namespace == v.scope.namespace {
		return tierFull
	}
	return v.access.peerTier(ctx, v.user, namespace, v.verb)
}

// recheck re-authorizes the stream's own scope: an explicit deny ends the
// stream, an unreachable API server does not.
func (v *viewer) recheck(ctx context.Context) error {
	if v.access == nil {
		return nil
	}
	err := v.access.authorizeScope(ctx, v.user, v.scope, v.verb)
	if errors.Is(err, errNoDecision) {
		return nil
	}
	return err
}

// view returns the wire form of e as the stream may see it, or nil when the
// record is out of scope or filtered out. Authorization comes first: the
// filters see only what the client would.
func (v *viewer) view(ctx context.Context, q *query, e entry) *pb.Flow {
	r := e.rec
	if !v.scope.inScope(r) {
		return nil
	}
	src, dst := v.tier(ctx, r.Source.Namespace), v.tier(ctx, r.Destination.Namespace)
	if src == tierFull && dst == tierFull {
		if !q.matches(r) {
			return nil
		}
		return e.flow
	}
	rr := redact(r, src, dst)
	if !q.matches(rr) {
		return nil
	}
	return toFlow(rr, src, dst)
}

// serve streams the ring from cursor on: everything held, then with follow
// every new record, until max_count, the client leaves, the ring closes or a
// re-check denies the scope. send gets each response and the records dropped
// since the previous one. Every response carries the resume token of the
// records it accounts for; a stream whose filters pass over half a ring of
// records without sending one sends the token alone, so a client that
// reconnects is not told of a gap made of records it would not have seen.
func serve(ctx context.Context, r *ring, q *query, v *viewer, recheck time.Duration, cursor uint64, send func(*pb.GetFlowsResponse, uint64) error) error {
	var dropped, sent uint64
	told := cursor // what the client's latest token accounts for
	progress := max(r.capacity()/2, 1)
	buf := make([]entry, 0, batchSize)
	var tick <-chan time.Time
	if q.follow {
		t := time.NewTicker(recheck)
		defer t.Stop()
		tick = t.C
	}
	for {
		var d uint64
		var wake <-chan struct{}
		var closed bool
		buf, cursor, d, wake, closed = r.read(cursor, batchSize, buf[:0])
		first := cursor - uint64(len(buf))
		accounted := cursor
		resp := &pb.GetFlowsResponse{}
		for i, e := range buf {
			if f := v.view(ctx, q, e); f != nil && !v.seam.skip(e.rec) {
				resp.Flows = append(resp.Flows, f)
				sent++
				if q.maxCount > 0 && sent == q.maxCount {
					accounted = first + uint64(i) + 1
					break
				}
			}
		}
		clear(buf) // do not pin records the ring has let go
		dropped += d
		if len(resp.Flows) > 0 || d > 0 || accounted-told >= progress {
			resp.DroppedCount = dropped
			resp.ResumeToken = r.token(accounted)
			if err := send(resp, d); err != nil {
				return err
			}
			told = accounted
		}
		switch {
		case q.maxCount > 0 && sent >= q.maxCount:
			return nil
		case len(buf) == batchSize:
			continue // more to read now
		case !q.follow || closed:
			return nil
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-wake:
				waiting = false
			case <-tick:
				if err := v.recheck(ctx); err != nil {
					return err
				}
			}
		}
	}
}

// makeEntry prepares a record for the ring.
func makeEntry(r *flowrecord.Record) entry {
	return entry{rec: r, flow: toFlow(r, tierFull, tierFull)}
}
