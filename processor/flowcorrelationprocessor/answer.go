package flowcorrelationprocessor

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A node collector's exporter gives each attempt a deadline (5 s by default)
// and sends the batch again when the answer does not come in time. Folded
// into the table, a batch is counted; sent again to the same process, its
// ledger ignores the repeat, but sent again to the process that replaced
// this one (a rollout), it is counted twice: the new process cannot know
// what its predecessor counted. So a batch is answered before its sender's
// deadline, whatever the exports behind the processor do:
//
//   - it is folded in only while the sender still waits, with answerMargin
//     of its deadline left for the answer to travel; a batch that cannot be
//     folded in by then is refused as it arrived (retryable, nothing counted);
//   - once folded in, it is answered; what it made ready goes on to the
//     next consumer in the background when that blocks (a sink's full
//     queue), at most sendsInFlight batches at once. When those are all
//     taken, new batches wait for one, and are refused at their deadline.
//
// A sender without a deadline (antrea_flows, a test) is answered when its
// exports were taken, as before.
const (
	// answerMargin is the part of a sender's deadline kept for the answer
	// (a quarter of what is left, when that is less).
	answerMargin = 500 * time.Millisecond
	// sendsInFlight bounds the batches handed on in the background.
	sendsInFlight = 16
)

// errRefusedAtDeadline is what a sender gets for a batch refused unfolded.
var errRefusedAtDeadline = errors.New("flow_correlation: the batch was not folded in before the sender's deadline " +
	"(the exports behind the gateway are slow); nothing of it was counted: send it again")

// answerBy is when a batch must be folded in, from the sender's deadline;
// ok is false when the sender set none.
func answerBy(ctx context.Context, now time.Time) (by time.Time, ok bool) {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return d.Add(-min(answerMargin, d.Sub(now)/4)), true
}

// backgroundSends bounds and tracks the batches handed on after their
// sender was answered.
type backgroundSends struct {
	slots chan struct{}
	wg    sync.WaitGroup
}

func newBackgroundSends() *backgroundSends {
	return &backgroundSends{slots: make(chan struct{}, sendsInFlight)}
}

// acquire takes a slot, waiting until by at most; it reports whether it did.
func (s *backgroundSends) acquire(ctx context.Context, by time.Time) bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	wait := time.Until(by)
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (s *backgroundSends) release() { <-s.slots }

// run runs send, holding the slot taken by acquire until it returns, and
// waits for it until by (or until the sender has gone).
func (s *backgroundSends) run(ctx context.Context, by time.Time, send func()) {
	done := make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.release()
		defer close(done)
		send()
	}()
	wait := time.Until(by)
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// wait waits for the background sends, or for ctx.
func (s *backgroundSends) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
