package flowstreamexporter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/exporter/flowstreamexporter/internal/metadata"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// history serves the part of a stream older than the ring from the flows
// table in ClickHouse, through the same viewer (scope, tiers, redaction,
// filters) as the live part.
type history struct {
	cfg  *HistoryConfig
	conn driver.Conn
	tel  *metadata.TelemetryBuilder
}

// openHistory prepares the connection pool; it connects on the first query,
// so a gateway starts while ClickHouse is down (history streams get
// UNAVAILABLE until it is back).
func openHistory(ctx context.Context, cfg *HistoryConfig, tel *metadata.TelemetryBuilder) (*history, error) {
	addr, secure, err := cfg.address()
	if err != nil {
		return nil, err
	}
	opts := &clickhouse.Options{
		Protocol:     clickhouse.Native,
		Addr:         []string{addr},
		Auth:         clickhouse.Auth{Database: cfg.Database, Username: cfg.Username, Password: string(cfg.Password)},
		DialTimeout:  cfg.DialTimeout,
		ReadTimeout:  cfg.QueryTimeout,
		MaxOpenConns: 8,
		MaxIdleConns: 2,
		Compression:  &clickhouse.Compression{Method: clickhouse.CompressionLZ4},
	}
	if secure {
		tc, err := cfg.TLS.LoadTLSConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("history.tls: cannot load the certificates (%w); check ca_file, cert_file and key_file", err)
		}
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		opts.TLS = tc
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("history: cannot prepare the ClickHouse client for %s: %w", cfg.Endpoint, err)
	}
	return &history{cfg: cfg, conn: conn, tel: tel}, nil
}

func (h *history) close() error { return h.conn.Close() }

// needed reports whether a stream starting at the ring's live start, whose
// records end at oldest or later (zero: none), needs history: it asked for
// records since a time before them, without a token of this ring's epoch.
func needed(q *query, reset bool, oldest time.Time) bool {
	if q.since.IsZero() || (q.resume != nil && !reset) {
		return false
	}
	return oldest.IsZero() || q.since.Before(oldest)
}

// historyPart is how a stream's history ended.
type historyPart struct {
	sent   uint64
	status *pb.HistoryStatus
	skip   *liveSkip // rule 3 of the seam, for the live part
}

// pendingFlow is a flow of the end second not yet known to be complete.
type pendingFlow struct {
	flow   *pb.Flow
	fp     uint64
	recent bool // may reach the ring after ClickHouse (seam rule 3)
}

// historyRun is one stream's history being sent.
type historyRun struct {
	q          *query
	v          *viewer
	tok        *pb.ResumeToken
	inRing     fingerprints
	recentFrom time.Time
	send       func(*pb.GetFlowsResponse) error

	part       historyPart
	limit      uint64
	pending    []pendingFlow // the flows of the end second pendingSec
	pendingSec int64
	batch      []*pb.Flow
}

// serve sends the history of q in responses of batchSize flows, each with
// tok (the live part's start: a client that resumes from it gets the live
// part). inRing are the fingerprints of the ring's records from the live
// start (seam rule 2), oldest their oldest end time.
//
// Flows are sent a whole second of end time at a time: when the row limit
// cuts a second, that second is left for the next request
// (continue_since), so that no flow is sent twice or left out across it.
func (h *history) serve(ctx context.Context, q *query, v *viewer, tok *pb.ResumeToken, inRing fingerprints, oldest time.Time,
	send func(*pb.GetFlowsResponse) error,
) (historyPart, error) {
	recentFrom := time.Now()
	if !oldest.IsZero() && oldest.Before(recentFrom) {
		recentFrom = oldest
	}
	run := &historyRun{q: q, v: v, tok: tok, inRing: inRing, send: send, limit: uint64(h.cfg.MaxRows),
		recentFrom: recentFrom.Add(-seamSlack).Truncate(time.Second)}
	run.part = historyPart{status: &pb.HistoryStatus{MaxRows: run.limit}, skip: &liveSkip{sent: fingerprints{}}}
	st := run.part.status

	qctx, cancel := context.WithTimeout(ctx, h.cfg.QueryTimeout)
	defer cancel()
	lower, want := q.since.Unix(), batchSize
	for !run.full() {
		where := historyWhere(q, lower)
		c, err := h.planChunk(qctx, where, lower, want)
		if err != nil {
			return run.part, h.failed(ctx, err)
		}
		if c.rows == 0 {
			break
		}
		if st.Rows == run.limit {
			st.Truncated = true // a row beyond the limit exists
			break
		}
		if err := h.readChunk(qctx, run, where, c); err != nil {
			var sf sendFailed
			if errors.As(err, &sf) {
				return run.part, sf.err // the client's, not ClickHouse's
			}
			return run.part, h.failed(ctx, err)
		}
		if st.Truncated || c.last {
			break
		}
		lower, want = c.end, min(want*chunkGrowth, maxChunkRows)
	}
	if err := run.finish(); err != nil {
		return run.part, errors.Unwrap(err)
	}
	outcome := "complete"
	if st.Truncated {
		outcome = "truncated"
	}
	h.tel.ExporterFlowStreamHistoryRows.Add(ctx, int64(st.Rows))
	h.tel.ExporterFlowStreamHistoryQueries.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
	return run.part, nil
}

// readChunk reads a planned chunk's rows into run, one more than the row
// limit leaves, to know whether the limit cuts the history.
func (h *history) readChunk(ctx context.Context, run *historyRun, where []string, c chunk) error {
	st := run.part.status
	rows, err := h.conn.Query(ctx, chunkRowsSQL(h.cfg.Database, h.cfg.Table, where, c, int(run.limit-st.Rows)+1))
	if err != nil {
		return err
	}
	defer rows.Close()
	row := newHistoryRow()
	for rows.Next() && !run.full() {
		if st.Rows == run.limit {
			st.Truncated = true
			return nil
		}
		st.Rows++
		if err := rows.Scan(row.dest...); err != nil {
			return err
		}
		rec, err := row.record()
		if err != nil {
			return err
		}
		if err := run.add(ctx, rec); err != nil {
			return err
		}
	}
	return rows.Err()
}

// full reports whether the request's max_count is reached.
func (run *historyRun) full() bool {
	return run.q.maxCount > 0 && run.part.sent+uint64(len(run.pending)) >= run.q.maxCount
}

// add takes one row: left to the live part, or pending in its second.
func (run *historyRun) add(ctx context.Context, rec *flowrecord.Record) error {
	if sec := rec.End.Unix(); sec != run.pendingSec {
		if err := run.commit(); err != nil {
			return err
		}
		run.pendingSec = sec
	}
	fp := fingerprint(rec)
	if run.inRing.take(fp) {
		return nil // the live part sends it (seam rule 2)
	}
	if f := run.v.view(ctx, run.q, entry{rec: rec, flow: toFlow(rec, tierFull, tierFull)}); f != nil {
		run.pending = append(run.pending, pendingFlow{flow: f, fp: fp, recent: !rec.End.Before(run.recentFrom)})
	}
	return nil
}

// commit moves the pending second, complete, to the batch.
func (run *historyRun) commit() error {
	for _, p := range run.pending {
		if run.q.maxCount > 0 && run.part.sent == run.q.maxCount {
			break // the client's max_count, within a second
		}
		run.batch = append(run.batch, p.flow)
		run.part.sent++
		if p.recent {
			run.part.skip.sent.add(p.fp)
		}
		if len(run.batch) == batchSize {
			if err := run.flush(false); err != nil {
				return err
			}
		}
	}
	run.pending = run.pending[:0]
	return nil
}

func (run *historyRun) flush(final bool) error {
	if len(run.batch) == 0 && !final {
		return nil
	}
	resp := &pb.GetFlowsResponse{Flows: run.batch, ResumeToken: run.tok}
	if final {
		resp.History = run.part.status
	}
	run.batch = nil
	if err := run.send(resp); err != nil {
		return sendFailed{err}
	}
	return nil
}

// sendFailed is an error sending to the client, told apart from reading
// ClickHouse.
type sendFailed struct{ err error }

func (s sendFailed) Error() string { return s.err.Error() }
func (s sendFailed) Unwrap() error { return s.err }

// finish sends what is left and the history's status. A history cut by
// the row limit leaves its last second to the next request, unless that
// second is all it read (more rows end in one second than the limit): then
// it sends them and goes on after that second (the rest of it is not sent).
func (run *historyRun) finish() error {
	st := run.part.status
	if st.Truncated {
		next := run.pendingSec
		if run.part.sent == 0 {
			if err := run.commit(); err != nil {
				return err
			}
			next++
		}
		run.pending = nil
		st.ContinueSince = timestamppb.New(time.Unix(next, 0))
	} else if err := run.commit(); err != nil {
		return err
	}
	run.part.skip.until = time.Now().Add(seamSlack)
	return run.flush(true)
}

// failed counts a failed history query and turns err into the stream's status.
func (h *history) failed(ctx context.Context, err error) error {
	h.tel.ExporterFlowStreamHistoryQueries.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("outcome", "failed")))
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return status.Errorf(codes.Unavailable, "history: cannot read the flows table %s.%s from ClickHouse (%v): retry, or ask for a since the gateway holds in memory",
		h.cfg.Database, h.cfg.Table, err)
}
