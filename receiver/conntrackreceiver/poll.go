package conntrackreceiver

// The poll loop: a dump of the conntrack table on a fixed grid of
// poll_interval, into the store, and the export of what is due.

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/profile"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// run polls on a fixed grid of poll_interval from the first poll: the ticker
// keeps one missed tick, so a poll that overran is followed at once by the
// next, and the grid points it covered are skipped (see pollOnce).
func (r *conntrackReceiver) run(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		r.pollOnce(ctx)
		if !r.waitForPoll(ctx, t.C) {
			return
		}
	}
}

// waitForPoll waits for the next poll tick (false: shutdown). Meanwhile, a
// queue of DESTROY events that reached evWakeAt is moved into the store (the
// records go out at the next poll, as they would have), so the queue stays
// short however many connections close between two polls.
func (r *conntrackReceiver) waitForPoll(ctx context.Context, tick <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick:
			return true
		case <-r.evWake:
			r.applyEvents(ctx)
		}
	}
}

// pollOnce applies pending DESTROY events, dumps the table, updates the
// store and exports what is due.
func (r *conntrackReceiver) pollOnce(ctx context.Context) {
	began := time.Now()
	now := r.now()
	r.applyEvents(ctx)
	if local, err := ctsource.LocalAddrs(r.ns); err == nil {
		r.local = local
	} else {
		r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedAddresses)
		r.logger.Warn("could not list the namespace's addresses; keeping the previous list", zap.Error(err))
	}
	if err := r.dump(now); err != nil {
		r.logger.Warn("conntrack dump failed; retrying at the next poll", zap.Error(err))
	} else {
		r.endResume(ctx)
		r.export(ctx, now)
	}
	r.tel.ReceiverConntrackConnections.Record(ctx, int64(r.store.Len()))
	took := time.Since(began)
	r.tel.ReceiverConntrackPollDuration.Record(ctx, took.Seconds())
	if took > r.cfg.PollInterval {
		r.noteOverrun(ctx, began, took)
	}
}

// noteOverrun counts a poll that took longer than poll_interval and logs,
// at most once a minute, how many did.
func (r *conntrackReceiver) noteOverrun(ctx context.Context, began time.Time, took time.Duration) {
	r.tel.ReceiverConntrackPollsOverrun.Add(ctx, 1)
	r.overruns++
	if began.Sub(r.lastOverrunLog) < shedLogInterval {
		return
	}
	r.lastOverrunLog = began
	r.logger.Warn("conntrack poll took longer than poll_interval; polls run back to back and records go out late",
		zap.Duration("poll_duration", took), zap.Duration("poll_interval", r.cfg.PollInterval),
		zap.Int("overruns_since_last_log", r.overruns), zap.Int("entries", r.lastEntries),
		zap.String("fix", "raise poll_interval or the collector's CPU limit: a poll's cost follows the entries in the table (4–5 µs of CPU each)"))
	r.overruns = 0
}

// dump reads every polled zone into the store. On a netlink error the poll
// is abandoned before EndPoll, so no connection is taken for gone.
func (r *conntrackReceiver) dump(now time.Time) error {
	ctx := context.Background()
	if r.src == nil {
		src, err := ctsource.Dial(r.ns)
		if err != nil {
			r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedDump)
			return err
		}
		r.src = src
	}
	r.store.BeginPoll(now)
	r.prof.Begin(now, r.local)
	r.pollShed, r.pollNewShed = 0, 0
	var entries int
	for _, zone := range r.prof.PollZones() {
		r.dumpZone = zone
		n, err := r.src.DumpZone(zone, r.offerFn)
		entries += n
		if err != nil {
			if ctsource.IsNoBufs(err) {
				r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedENOBUFS)
			} else {
				r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedDump)
			}
			// A fresh socket for the next poll: the failed one may hold the
			// rest of the dump.
			r.src.Close()
			r.src = nil
			r.shed.endPoll(false)
			r.noteShed(ctx, now)
			return err
		}
	}
	ps := r.prof.End(r.observeFn)
	st := r.store.EndPoll()
	r.lastEntries = entries
	r.tel.ReceiverConntrackEntries.Record(ctx, int64(entries))
	r.countFiltered(ctx, ps)
	if st.Stale > 0 {
		r.tel.ReceiverConntrackRecordsDropped.Add(ctx, int64(st.Stale), droppedStale)
		r.logger.Warn("gone connections removed before their final record was exported", zap.Int("count", st.Stale))
	}
	r.shed.endPoll(true)
	r.noteShed(ctx, now)
	return nil
}

// offer hands one dumped entry to the profile.
func (r *conntrackReceiver) offer(c *store.Conn) {
	r.prof.Offer(r.dumpZone, c, r.observeFn)
}

func (r *conntrackReceiver) observe(c *store.Conn) {
	if !r.store.Observe(c) {
		r.pollShed++
		if r.shed.add(c) {
			r.pollNewShed++
		}
	}
}

func (r *conntrackReceiver) countFiltered(ctx context.Context, ps profile.Stats) {
	for _, f := range []struct {
		n      int
		reason metric.MeasurementOption
	}{{ps.WrongZone, filteredWrongZone}, {ps.Protocol, filteredProtocol}, {ps.CTMark, filteredCTMark}, {ps.Uncorrelated, filteredUncorrelated}} {
		if f.n > 0 {
			r.tel.ReceiverConntrackEntriesFiltered.Add(ctx, int64(f.n), f.reason)
		}
	}
}

// noteShed counts the connections this poll shed that the previous one did
// not (each shed connection once), and logs now and then how many are left
// out.
func (r *conntrackReceiver) noteShed(ctx context.Context, now time.Time) {
	if r.pollNewShed > 0 {
		r.tel.ReceiverConntrackConnectionsShed.Add(ctx, int64(r.pollNewShed), shedMaxConnections)
	}
	if r.pollShed > 0 && now.Sub(r.lastShedLog) >= shedLogInterval {
		r.lastShedLog = now
		r.logger.Warn("connection store full: new connections are not tracked",
			zap.Int("shed_this_poll", r.pollShed), zap.Int("newly_shed", r.pollNewShed),
			zap.Int("max_connections", r.cfg.MaxConnections))
	}
}

// endResume, after the first complete poll since a resume, forgets the saved
// connections that ended while no receiver ran: their last deltas are lost
// (counted), conntrack holds nothing of them any more.
func (r *conntrackReceiver) endResume(ctx context.Context) {
	if !r.resuming {
		return
	}
	r.resuming = false
	res := r.store.EndResume()
	r.tel.ReceiverConntrackResumeConnections.Add(ctx, int64(res.Resumed), resumeResumed)
	r.tel.ReceiverConntrackResumeConnections.Add(ctx, int64(res.Closed), resumeClosed)
	r.tel.ReceiverConntrackResumeConnections.Add(ctx, int64(len(res.Ended)), resumeEnded)
	r.ckpt.forget(res.Forget)
	r.logger.Info("resumed from storage", zap.Int("resumed", res.Resumed),
		zap.Int("closed_already_reported", res.Closed), zap.Int("ended_while_stopped", len(res.Ended)))
}
