package loadbalancingexporter

import (
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

const (
	// retryMessage is what exporterhelper logs (at info) each time it
	// retries a batch the exporter failed to send.
	retryMessage = "Exporting failed. Will retry the request after interval."
	// noEndpoint is contrib's error for a batch when its resolver has returned
	// no backend: the hash ring is empty, so the batch's routing key has no
	// endpoint (""), and nothing of the batch was sent.
	noEndpoint = `couldn't find the exporter for the endpoint ""`

	// grace is how long retries are held back silently: a resolver that
	// fills the ring within it (at every start the queue may try a batch
	// before the first resolution) is not worth a line.
	grace = 10 * time.Second
	// every is how often, while it lasts, the wait is said again (warn).
	every = 5 * time.Minute
	// minGap: a held-back retry more than this after the previous one
	// starts a new wait (the previous one ended); at least twice the longest
	// retry interval.
	minGap = 2 * time.Minute
)

// waitState is what the exporter's loggers share about the current wait for
// a backend: since when retries are held back and how many.
type waitState struct {
	resolver string
	gap      time.Duration
	now      func() time.Time

	mu       sync.Mutex
	since    time.Time // first held-back retry of this wait; zero: none
	last     time.Time // latest held-back retry
	lastNote time.Time // latest line about the wait; zero: none yet
	held     int       // retries held back in this wait
}

func newWaitState(resolver string, maxInterval time.Duration) *waitState {
	return &waitState{resolver: resolver, gap: max(minGap, 2*maxInterval), now: time.Now}
}

// note is a line to write about the wait.
type note struct {
	level  zapcore.Level
	msg    string
	fields []zapcore.Field
}

// hold counts a held-back retry and returns the line due about the wait,
// if one is.
func (w *waitState) hold() *note {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.since.IsZero() || now.Sub(w.last) > w.gap {
		w.since, w.lastNote, w.held = now, time.Time{}, 0
	}
	w.last = now
	w.held++
	waited := now.Sub(w.since)
	fields := []zapcore.Field{zap.String("resolver", w.resolver), zap.Duration("waiting", waited.Round(time.Second)), zap.Int("retries_not_logged", w.held)}
	switch {
	case w.lastNote.IsZero() && waited >= grace:
		w.lastNote = now
		return &note{zapcore.InfoLevel, "No gateway endpoint yet: the resolver has returned none. The records wait in the sending queue " +
			"and are retried; those retries are not logged while this lasts (expected while the gateways start).", fields}
	case !w.lastNote.IsZero() && now.Sub(w.lastNote) >= every:
		w.lastNote = now
		return &note{zapcore.WarnLevel, "Still no gateway endpoint: the resolver has returned none. The records wait in the sending queue " +
			"and are retried; check that the resolver's gateways run and are ready.", fields}
	}
	return nil
}

// waitingCore is the core of the exporter's logger: every entry goes to the
// collector's core as before, except the retries of batches for which no
// backend was found (exporterhelper logs one line per batch and retry, with
// contrib's "couldn't find the exporter for the endpoint" error: ~150-200
// lines while the gateways of a new install start). Those are counted, and
// said in one line once the wait lasts (waitState.hold). The batches
// themselves are untouched: they stay in the sending queue and are retried
// exactly as before, and one given up after max_elapsed_time is logged
// (exporterhelper's "Dropping data" error) as before.
type waitingCore struct {
	zapcore.Core
	state *waitState
}

func (c *waitingCore) With(fields []zapcore.Field) zapcore.Core {
	return &waitingCore{Core: c.Core.With(fields), state: c.state}
}

func (c *waitingCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Message == retryMessage && c.Enabled(ent.Level) {
		// Decided in Write, which sees the error.
		return ce.AddCore(ent, c)
	}
	return c.Core.Check(ent, ce)
}

func (c *waitingCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	if ent.Message != retryMessage || !noBackend(fields) {
		return c.write(ent, fields)
	}
	n := c.state.hold()
	if n == nil {
		return nil
	}
	ent.Level, ent.Message = n.level, n.msg
	return c.write(ent, n.fields)
}

// write writes through the collector's core as its own Check would (its
// level and sampling apply).
func (c *waitingCore) write(ent zapcore.Entry, fields []zapcore.Field) error {
	if ce := c.Core.Check(ent, nil); ce != nil {
		ce.Write(fields...)
	}
	return nil
}

// noBackend: the entry's error is contrib's for an empty hash ring.
func noBackend(fields []zapcore.Field) bool {
	for _, f := range fields {
		if f.Type == zapcore.ErrorType && f.Key == "error" {
			if err, ok := f.Interface.(error); ok && strings.Contains(err.Error(), noEndpoint) {
				return true
			}
		}
	}
	return false
}
