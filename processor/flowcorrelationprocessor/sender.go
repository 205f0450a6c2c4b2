package flowcorrelationprocessor

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// Retry policy for records the next consumer refuses with a retryable error.
// The processor has already folded their data into its state, so handing the
// error back to the sender would lose them; it keeps them and retries.
const (
	retryFirstBackoff = time.Second
	retryMaxBackoff   = 30 * time.Second
	retryGiveUpAfter  = 5 * time.Minute
)

// batch is a set of records the processor emits in one ConsumeLogs call,
// under one resource per cluster (k8s.cluster.uid), in order of first use.
type batch struct {
	logs               plog.Logs
	scopeName, version string
	clusters           []clusterRecords
	n                  int
	// hint is how many records the batch may get at most, when known: each
	// cluster's record slice is sized for what is left of it at once.
	hint    int
	byState [4]int64 // records per flowrecord.CorrelationState
}

// clusterRecords are the records of one cluster in a batch.
type clusterRecords struct {
	uid     string
	records plog.LogRecordSlice
}

func newBatch(scopeName, version string, hint int) *batch {
	return &batch{logs: plog.NewLogs(), scopeName: scopeName, version: version, hint: hint}
}

func (b *batch) add(r *flowrecord.Record) {
	attrcodec.Encode(r, b.recordsOf(r.ClusterUID).AppendEmpty())
	b.n++
	if int(r.Correlation) < len(b.byState) {
		b.byState[r.Correlation]++
	}
}

// recordsOf is the record slice under the resource of cluster uid.
func (b *batch) recordsOf(uid string) plog.LogRecordSlice {
	for i := range b.clusters {
		if b.clusters[i].uid == uid {
			return b.clusters[i].records
		}
	}
	rl := b.logs.ResourceLogs().AppendEmpty()
	if uid != "" {
		rl.Resource().Attributes().PutStr(catalogue.ResourceClusterUID, uid)
	}
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(b.scopeName)
	sl.Scope().SetVersion(b.version)
	if left := b.hint - b.n; left > 0 {
		sl.LogRecords().EnsureCapacity(left)
	}
	b.clusters = append(b.clusters, clusterRecords{uid: uid, records: sl.LogRecords()})
	return b.clusters[len(b.clusters)-1].records
}

func (b *batch) len() int { return b.n }

// retry is a batch waiting for another attempt.
type retry struct {
	b         *batch
	firstFail time.Time
	nextTry   time.Time
	backoff   time.Duration
}

// sender hands batches to the next consumer and owns the ones it refused.
type sender struct {
	next   consumer.Logs
	tel    *telemetry
	logger *zap.Logger
	limit  int // records held for retry at most

	mu      sync.Mutex
	retries []*retry
	held    int // records in retries
}

// send delivers b; a retryable refusal queues it for the retry loop.
func (s *sender) send(ctx context.Context, b *batch, now time.Time) {
	if b.len() == 0 {
		return
	}
	err := s.next.ConsumeLogs(ctx, b.logs)
	if s.settled(ctx, b, err) {
		return
	}
	s.tel.ProcessorFlowCorrelationRecordsRetried.Add(ctx, int64(b.len()))
	s.logger.Warn("next consumer refused flow records; will retry", zap.Int("records", b.len()), zap.Error(err))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retries = append(s.retries, &retry{b: b, firstFail: now, nextTry: now.Add(retryFirstBackoff), backoff: retryFirstBackoff})
	s.held += b.len()
	for s.held > s.limit && len(s.retries) > 1 {
		old := s.retries[0]
		s.retries = s.retries[1:]
		s.held -= old.b.len()
		s.fail(ctx, old.b, reasonRetryQueueFull, nil)
	}
}

// settled counts the outcome of one delivery attempt and reports whether b
// is done with (delivered, or refused for good).
func (s *sender) settled(ctx context.Context, b *batch, err error) bool {
	switch {
	case err == nil:
		for st, n := range b.byState {
			if n > 0 {
				s.tel.ProcessorFlowCorrelationRecordsEmitted.Add(ctx, n, stateOption(flowrecord.CorrelationState(st)))
			}
		}
		return true
	case consumererror.IsPermanent(err):
		s.fail(ctx, b, reasonDownstreamPerm, err)
		return true
	case errors.Is(err, exporterhelper.ErrQueueIsFull):
		// An exporter's sending queue refused the batch (and counted it in
		// its enqueue_failed records). Not retried: behind a fan-out the
		// other exporters took the batch already, and sending it again
		// would give each of them every record twice. An exporter that
		// must not lose a burst blocks instead (block_on_overflow), as
		// flowtel's clickhouse_flows and ipfix do by default.
		s.fail(ctx, b, reasonDownstreamQueueFull, err)
		return true
	}
	return false
}

func (s *sender) fail(ctx context.Context, b *batch, reason string, err error) {
	s.tel.ProcessorFlowCorrelationRecordsFailed.Add(ctx, int64(b.len()), withReason(reason))
	s.logger.Error("flow records lost: the next consumer did not accept them",
		zap.Int("records", b.len()), zap.String("reason", reason), zap.Error(err))
}

// retryDue retries the batches whose backoff has passed; at shutdown (final)
// it tries every batch once more and counts what still fails.
func (s *sender) retryDue(ctx context.Context, now time.Time, final bool) {
	s.mu.Lock()
	var due []*retry
	kept := s.retries[:0]
	for _, r := range s.retries {
		if final || !now.Before(r.nextTry) {
			due = append(due, r)
			s.held -= r.b.len()
		} else {
			kept = append(kept, r)
		}
	}
	clear(s.retries[len(kept):])
	s.retries = kept
	s.mu.Unlock()

	for _, r := range due {
		err := s.next.ConsumeLogs(ctx, r.b.logs)
		if s.settled(ctx, r.b, err) {
			continue
		}
		switch {
		case final:
			s.fail(ctx, r.b, reasonShutdownUndeliver, err)
		case now.Sub(r.firstFail) >= retryGiveUpAfter:
			s.fail(ctx, r.b, reasonRetryExhausted, err)
		default:
			r.backoff = min(2*r.backoff, retryMaxBackoff)
			r.nextTry = now.Add(r.backoff)
			s.mu.Lock()
			s.retries = append(s.retries, r)
			s.held += r.b.len()
			s.mu.Unlock()
		}
	}
}

// waiting is the number of records held for a retry.
func (s *sender) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}
