package conntrackreceiver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/recordform"
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
	encode func(*flowrecord.Record, plog.LogRecord) // the configured form

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
	encode, _ := recordform.Encoder(cfg.Encoding) // Validate checked the name
	r := &conntrackReceiver{
		cfg: cfg, set: set, next: next, obs: obs, tel: tel, logger: set.Logger, encode: encode,
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
