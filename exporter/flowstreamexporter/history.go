package flowstreamexporter

import (
	"context"
	"crypto/tls"
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
	limit := h.cfg.MaxRows
	part := historyPart{status: &pb.HistoryStatus{MaxRows: uint64(limit)}}
	recentFrom := time.Now()
	if !oldest.IsZero() && oldest.Before(recentFrom) {
		recentFrom = oldest
	}
	recentFrom = recentFrom.Add(-seamSlack).Truncate(time.Second)
	part.skip = &liveSkip{sent: fingerprints{}}

	qctx, cancel := context.WithTimeout(ctx, h.cfg.QueryTimeout)
	defer cancel()
	rows, err := h.conn.Query(qctx, historySQL(h.cfg.Database, h.cfg.Table, q, limit+1))
	if err != nil {
		return part, h.failed(ctx, err)
	}
	defer rows.Close()

	row := newHistoryRow()
	var pending []pendingFlow
	var pendingSec int64
	var batch []*pb.Flow
	flush := func(final bool) error {
		if len(batch) == 0 && !final {
			return nil
		}
		resp := &pb.GetFlowsResponse{Flows: batch, ResumeToken: tok}
		if final {
			resp.History = part.status
		}
		batch = nil
		return send(resp)
	}
	commit := func() error { // the pending second is complete
		for _, p := range pending {
			batch = append(batch, p.flow)
			part.sent++
			if p.recent {
				part.skip.sent.add(p.fp)
			}
			if len(batch) == batchSize {
				if err := flush(false); err != nil {
					return err
				}
			}
		}
		pending = pending[:0]
		return nil
	}
	full := func() bool { return q.maxCount > 0 && part.sent+uint64(len(pending)) >= q.maxCount }
	for rows.Next() && !full() {
		if part.status.Rows == uint64(limit) {
			part.status.Truncated = true
			break
		}
		part.status.Rows++
		if err := rows.Scan(row.dest...); err != nil {
			return part, h.failed(ctx, err)
		}
		rec, err := row.record()
		if err != nil {
			return part, h.failed(ctx, err)
		}
		if sec := rec.End.Unix(); sec != pendingSec {
			if err := commit(); err != nil {
				return part, err
			}
			pendingSec = sec
		}
		fp := fingerprint(rec)
		if inRing.take(fp) {
			continue // the live part sends it (seam rule 2)
		}
		if f := v.view(ctx, q, entry{rec: rec, flow: toFlow(rec, tierFull, tierFull)}); f != nil {
			pending = append(pending, pendingFlow{flow: f, fp: fp, recent: !rec.End.Before(recentFrom)})
		}
	}
	if err := rows.Err(); err != nil {
		return part, h.failed(ctx, err)
	}
	if part.status.Truncated {
		next := pendingSec
		if part.sent == 0 {
			// One second holds more rows than the limit: send what was
			// read of it and go on after it (documented: the rest of
			// that second is not sent).
			if err := commit(); err != nil {
				return part, err
			}
			next++
		}
		pending = nil
		part.status.ContinueSince = timestamppb.New(time.Unix(next, 0))
	} else if err := commit(); err != nil {
		return part, err
	}
	part.skip.until = time.Now().Add(seamSlack)
	outcome := "complete"
	if part.status.Truncated {
		outcome = "truncated"
	}
	h.tel.ExporterFlowStreamHistoryRows.Add(ctx, int64(part.status.Rows))
	h.tel.ExporterFlowStreamHistoryQueries.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
	return part, flush(true)
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
