package conntrackreceiver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/ti-mo/conntrack"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/profile"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

const (
	// maxRecordsPerBatch splits a large export into several plog batches.
	maxRecordsPerBatch = 8192
	// shedLogInterval rate-limits the log lines about shed connections and
	// about polls longer than poll_interval.
	shedLogInterval = time.Minute
	// eventRetryDelay is the pause before re-subscribing after an event socket failure.
	eventRetryDelay = time.Second
	// evWakeAt is the queue length at which DESTROY events are applied
	// before the next poll (≈ 1 MB of queued events).
	evWakeAt         = 4096
	resourceNodeName = "k8s.node.name"
)

type conntrackReceiver struct {
	cfg    *Config
	set    receiver.Settings
	next   consumer.Logs
	obs    *receiverhelper.ObsReport
	tel    *metadata.TelemetryBuilder
	logger *zap.Logger
	node   string

	ns    *ctsource.Namespace
	src   *ctsource.Source
	prof  *profile.Profile
	store *store.Store
	local map[netip.Addr]struct{}

	cancel context.CancelFunc
	wg     sync.WaitGroup

	// denied is the denied-connection path (nil without the denied option).
	denied *denied

	// ckpt saves what was exported per connection (nil without storage);
	// resuming holds until the first poll after a resume completed.
	ckpt *checkpoint
	// forgotten is reused to carry the store's deleted closed connections
	// to the checkpoint.
	forgotten []store.Exported
	resuming  bool

	// DESTROY events wait here for the poll loop, which owns the store. The
	// queue holds at most cfg.MaxQueuedEvents; evWake asks the poll loop to
	// apply it early when it is half full. evSpare is the other buffer.
	evMu      sync.Mutex
	evPending []pendingEvent
	evSpare   []pendingEvent
	evWake    chan struct{}
	evWakeAt  int

	// Poll-loop state, reused across polls.
	exports     []store.Export
	observeFn   func(*store.Conn)
	offerFn     func(*store.Conn)
	dumpZone    uint16
	shed        *shedSet
	pollShed    int // connections shed at this poll
	pollNewShed int // of which not shed at the previous poll
	lastShedLog time.Time
	// Polls longer than poll_interval since the last log line about them.
	overruns       int
	lastOverrunLog time.Time
	lastEntries    int // entries of the last complete dump
	now            func() time.Time
}

type pendingEvent struct {
	conn store.Conn
	at   time.Time
}

func newReceiver(set receiver.Settings, cfg *Config, next consumer.Logs) (*conntrackReceiver, error) {
	obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: set.ID, Transport: "netlink", ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, err
	}
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	protocols, err := cfg.protocolNumbers()
	if err != nil {
		return nil, err
	}
	prof, err := profile.New(cfg.profileConfig(protocols))
	if err != nil {
		return nil, err
	}
	active, idle, stale := cfg.timeouts()
	r := &conntrackReceiver{
		cfg: cfg, set: set, next: next, obs: obs, tel: tel, logger: set.Logger,
		node: cfg.nodeName(), prof: prof, now: time.Now, evWake: make(chan struct{}, 1),
		store: store.New(store.Config{ActiveTimeout: active, IdleTimeout: idle, StaleTimeout: stale, MaxConnections: cfg.MaxConnections}),
	}
	r.observeFn = r.observe
	r.offerFn = r.offer
	r.shed = newShedSet(shedMemory)
	r.evWakeAt = max(1, min(evWakeAt, cfg.MaxQueuedEvents/2))
	return r, nil
}

// Start resumes from the storage extension when one is configured, opens the
// namespace and the conntrack socket, checks that the table can be read,
// enables counters and timestamps, and starts polling.
func (r *conntrackReceiver) Start(ctx context.Context, host component.Host) (err error) {
	defer func() {
		if err != nil {
			r.closeAll(ctx)
		}
	}()
	if r.cfg.Storage != nil {
		if err := r.resume(ctx, host); err != nil {
			return err
		}
	}
	if r.ns, err = ctsource.OpenNamespace(r.cfg.NetNS); err != nil {
		return err
	}
	if r.src, err = ctsource.Dial(r.ns); err != nil {
		return err
	}
	if _, err := r.src.Probe(); err != nil {
		return err
	}
	r.setUpAccounting()
	if m, err := ctsource.TableMax(r.ns, r.cfg.SysctlPath); err == nil {
		r.tel.ReceiverConntrackTableMax.Record(context.Background(), m)
	} else {
		r.logger.Warn("could not read nf_conntrack_max", zap.Error(err))
	}
	if r.cfg.Denied.HasValue() {
		if err := r.openDenied(); err != nil {
			return err
		}
	}
	var events *ctsource.Events
	if r.cfg.Events {
		if events, err = ctsource.ListenDestroy(r.ns); err != nil {
			return err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if events != nil {
		r.wg.Add(1)
		go r.runEvents(runCtx, events)
	}
	if r.denied != nil {
		r.startDenied(runCtx)
	}
	r.wg.Add(1)
	go r.run(runCtx)
	return nil
}

// resume opens the checkpoint and hands what the previous run exported to the
// store, before the first poll.
func (r *conntrackReceiver) resume(ctx context.Context, host component.Host) error {
	ckpt, err := openCheckpoint(ctx, host, *r.cfg.Storage, r.set.ID)
	if err != nil {
		return err
	}
	r.ckpt = ckpt
	saved, bad, err := ckpt.load(ctx)
	if err != nil {
		return fmt.Errorf("storage: cannot read the connections the previous run exported: %w (got %q); check the extension's storage, or remove storage to start from scratch", err, *r.cfg.Storage)
	}
	if bad > 0 {
		r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, int64(bad), failedStorage)
		r.logger.Warn("storage held entries this receiver cannot read; they were removed", zap.Int("count", bad))
	}
	r.store.Resume(saved)
	r.resuming = true
	return nil
}

// Shutdown stops polling and event handling, then flushes: one last poll, and
// a record for everything not yet reported (deltas of live connections since
// their last export, the end-of-flow records of connections already gone),
// saved to the checkpoint when there is one. Then it closes the sockets.
func (r *conntrackReceiver) Shutdown(ctx context.Context) error {
	if r.cancel != nil {
		r.cancel()
		r.wg.Wait()
		r.flush(ctx)
		r.flushDenied(ctx)
	}
	return r.closeAll(ctx)
}

func (r *conntrackReceiver) closeAll(ctx context.Context) error {
	err := r.closeDenied()
	if r.src != nil {
		err = errors.Join(err, r.src.Close())
		r.src = nil
	}
	if r.ns != nil {
		err = errors.Join(err, r.ns.Close())
		r.ns = nil
	}
	if r.ckpt != nil {
		err = errors.Join(err, r.ckpt.close(ctx))
		r.ckpt = nil
	}
	return err
}

// flush runs at shutdown, once the poll loop and the event goroutine are done.
func (r *conntrackReceiver) flush(ctx context.Context) {
	r.pollOnce(ctx)
	now := r.now()
	r.exports = r.store.Flush(now, r.exports[:0])
	var live, ended int64
	for i := range r.exports {
		if r.exports[i].Reason == flowrecord.EndReasonEndOfFlow {
			ended++
		} else {
			live++
		}
	}
	r.tel.ReceiverConntrackRecordsFlushed.Add(ctx, live, flushedLive)
	r.tel.ReceiverConntrackRecordsFlushed.Add(ctx, ended, flushedEndOfFlow)
	r.sendAll(ctx, r.exports, now)
	r.logger.Info("conntrack receiver flushed at shutdown", zap.Int64("live", live), zap.Int64("end_of_flow", ended))
}

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

// export sends the records due at now.
func (r *conntrackReceiver) export(ctx context.Context, now time.Time) {
	r.exports = r.store.Expired(now, r.exports[:0])
	r.sendAll(ctx, r.exports, now)
}

// sendAll sends xs in batches and saves what the accepted ones exported to
// the checkpoint, in one write.
func (r *conntrackReceiver) sendAll(ctx context.Context, xs []store.Export, now time.Time) {
	for i := 0; i < len(xs); i += maxRecordsPerBatch {
		batch := xs[i:min(len(xs), i+maxRecordsPerBatch)]
		if r.send(ctx, batch, now) {
			r.ckpt.note(batch, now.UnixNano())
		}
	}
	if r.ckpt != nil {
		r.forgotten = r.store.TakeForgotten(r.forgotten[:0])
		r.ckpt.forget(r.forgotten)
	}
	if err := r.ckpt.commit(ctx); err != nil {
		r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedStorage)
		r.logger.Warn("could not save the exported connections to storage; after a restart their next delta may repeat what was sent", zap.Error(err))
	}
}

// send hands one batch to the next consumer; it reports whether it was accepted.
func (r *conntrackReceiver) send(ctx context.Context, xs []store.Export, now time.Time) bool {
	ld, lrs := r.newLogs(len(xs))
	var rec flowrecord.Record
	var noCounters, noTimestamps int64
	for i := range xs {
		toRecord(&xs[i], r.node, now, &rec)
		attrcodec.Encode(&rec, lrs.AppendEmpty())
		if !xs[i].Conn.Counted() {
			noCounters++
		}
		if xs[i].KernelStart == 0 {
			noTimestamps++
		}
	}
	if !r.consume(ctx, ld, len(xs)) {
		return false
	}
	r.countIncomplete(ctx, noCounters, noTimestamps)
	return true
}

// newLogs is an empty batch for n records under the receiver's resource
// (the Node) and scope.
func (r *conntrackReceiver) newLogs(n int) (plog.Logs, plog.LogRecordSlice) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(resourceNodeName, r.node)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(metadata.ScopeName)
	sl.Scope().SetVersion(r.set.BuildInfo.Version)
	lrs := sl.LogRecords()
	lrs.EnsureCapacity(n)
	return ld, lrs
}

// consume hands a batch of n records to the next consumer, counted; it
// reports whether it was accepted.
func (r *conntrackReceiver) consume(ctx context.Context, ld plog.Logs, n int) bool {
	octx := r.obs.StartLogsOp(ctx)
	err := r.next.ConsumeLogs(octx, ld)
	r.obs.EndLogsOp(octx, "conntrack", n, err)
	if err != nil {
		r.tel.ReceiverConntrackRecordsDropped.Add(ctx, int64(n), droppedConsumerError)
		r.logger.Warn("next consumer refused flow records", zap.Int("records", n), zap.Error(err))
		return false
	}
	r.tel.ReceiverConntrackRecordsEmitted.Add(ctx, int64(n))
	return true
}

// toRecord writes one export as a flow record. Kubernetes identity, flow type,
// reporter side and correlation key are the k8s_flow processor's job.
func toRecord(x *store.Export, node string, now time.Time, rec *flowrecord.Record) {
	c := &x.Conn
	*rec = flowrecord.Record{
		Start: x.Start, End: x.End, Observed: now,
		Protocol:                   c.Proto,
		Source:                     flowrecord.Endpoint{Address: c.Src, Port: c.SrcPort},
		Destination:                flowrecord.Endpoint{Address: c.Dst, Port: c.DstPort},
		OriginalDestinationAddress: c.OrigDst,
		OriginalDestinationPort:    c.OrigDstPort,
		Stats: flowrecord.Counters{PacketTotal: c.Orig.Packets, OctetTotal: c.Orig.Bytes,
			PacketDelta: x.OrigDelta.Packets, OctetDelta: x.OrigDelta.Bytes},
		ReverseStats: flowrecord.Counters{PacketTotal: c.Reply.Packets, OctetTotal: c.Reply.Bytes,
			PacketDelta: x.ReplyDelta.Packets, OctetDelta: x.ReplyDelta.Bytes},
		EndReason:        x.Reason,
		ProxySNATAddress: c.SNATAddr,
		ProxySNATPort:    c.SNATPort,
		Conntrack:        flowrecord.Conntrack{ID: c.ID, Zone: c.Zone, Mark: c.Mark, Labels: c.Labels},
		Reporter:         flowrecord.Reporter{NodeName: node},
	}
	if c.IsTCP() {
		rec.TCPState = store.TCPStateName(c.TCPState)
	}
	if c.IsICMP() {
		// The key's ports hold the ICMP type, code and identifier.
		typ, code, id := c.ICMP()
		rec.ICMP = flowrecord.ICMP{Type: typ, Code: code, ID: id}
		rec.Source.Port, rec.Destination.Port, rec.OriginalDestinationPort, rec.ProxySNATPort = 0, 0, 0, 0
	}
}

// runEvents receives DESTROY events until shutdown, re-subscribing after a
// socket failure (counted; events lost in an overflow cannot be recovered,
// but the connections they ended still get their final record from polling).
func (r *conntrackReceiver) runEvents(ctx context.Context, ev *ctsource.Events) {
	defer r.wg.Done()
	for {
		err := ev.Run(ctx, r.queueEvent)
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

// queueEvent runs on the event goroutine: it converts the flow and leaves it
// for the poll loop.
func (r *conntrackReceiver) queueEvent(f *conntrack.Flow) {
	at := r.now()
	r.evMu.Lock()
	n := len(r.evPending)
	full := n >= r.cfg.MaxQueuedEvents
	if !full {
		r.evPending = append(r.evPending, pendingEvent{at: at})
		ctsource.Convert(f, &r.evPending[n].conn)
	}
	r.evMu.Unlock()
	if full {
		r.tel.ReceiverConntrackEvents.Add(context.Background(), 1, eventQueueFull)
		return
	}
	if n+1 == r.evWakeAt {
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

var errNilConsumer = errors.New("nil next consumer")
