package conntrackreceiver

// DESTROY events: received on their own goroutine, queued, and applied to
// the store by the poll loop.

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// runEvents receives DESTROY events until shutdown, re-subscribing after a
// socket failure (counted; events lost in an overflow cannot be recovered,
// but the connections they ended still get their final record from polling).
func (r *conntrackReceiver) runEvents(ctx context.Context, ev *ctsource.Events) {
	defer r.wg.Done()
	for {
		err := ev.Run(ctx, r.queueEvents)
		if ctx.Err() != nil {
			return
		}
		if ctsource.IsNoBufs(err) {
			r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedENOBUFS)
		} else {
			r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedEvents)
		}
		r.logger.Warn("conntrack event socket failed; re-subscribing", zap.Error(err))
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(eventRetryDelay):
			}
			if ev, err = ctsource.ListenDestroy(r.ns); err == nil {
				break
			}
			r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedEvents)
		}
	}
}

// queueEvents runs on the event goroutine: it leaves the events of one read
// for the poll loop, under one lock, and wakes the poll loop when the queue
// reaches evWakeAt.
func (r *conntrackReceiver) queueEvents(cs []store.Conn) {
	at := r.now()
	r.evMu.Lock()
	n := len(r.evPending)
	take := min(len(cs), max(0, r.cfg.MaxQueuedEvents-n))
	for i := range take {
		r.evPending = append(r.evPending, pendingEvent{conn: cs[i], at: at})
	}
	r.evMu.Unlock()
	if shed := len(cs) - take; shed > 0 {
		r.tel.ReceiverConntrackEvents.Add(context.Background(), int64(shed), eventQueueFull)
	}
	if n < r.evWakeAt && n+take >= r.evWakeAt {
		select {
		case r.evWake <- struct{}{}:
		default:
		}
	}
}

func (r *conntrackReceiver) applyEvents(ctx context.Context) {
	r.evMu.Lock()
	evs := r.evPending
	r.evPending = r.evSpare[:0]
	r.evMu.Unlock()
	// The drained buffer becomes the spare once applied (only this
	// goroutine touches evSpare).
	defer func() { r.evSpare = evs[:0] }()
	var applied, ignored, ended, shed int
	for i := range evs {
		c := &evs[i].conn
		if !r.prof.Event(c) {
			ignored++
			continue
		}
		switch r.store.Final(c, evs[i].at) {
		case store.FinalApplied:
			applied++
		case store.FinalAlreadyEnded:
			ended++
		case store.FinalShed:
			shed++
		}
	}
	for _, o := range []struct {
		n int
		r metric.MeasurementOption
	}{{applied, eventApplied}, {ignored, eventIgnored}, {ended, eventAlreadyEnded}, {shed, eventShed}} {
		if o.n > 0 {
			r.tel.ReceiverConntrackEvents.Add(ctx, int64(o.n), o.r)
		}
	}
}
