package flowcorrelationprocessor

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/aggregate"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/metadata"
)

// flowProcessor is the flow_correlation processor, in either mode.
type flowProcessor struct {
	cfg     *Config
	next    consumer.Logs
	logger  *zap.Logger
	tel     *telemetry
	clock   clock
	version string
	out     *sender
	// background holds the sends that outlive their sender's answer (answer.go).
	background *backgroundSends
	// identity is the gateway's Kubernetes index (kubernetes settings); nil when off.
	identity *identity

	// Aggregate mode only.
	mu       sync.Mutex
	table    *aggregate.Table
	tick     time.Duration
	stop     chan struct{}
	done     chan struct{}
	started  atomic.Bool
	stopOnce sync.Once

	decoded sync.Pool // *decodeBuffer
	// filled is the copy of an exported record the Kubernetes index fills
	// (the table's own must not change); under mu.
	filled flowrecord.Record
	// paired counts the pairs of the batch being added; under mu.
	paired int64
}

func newProcessor(set processor.Settings, cfg *Config, next consumer.Logs, clk clock) (*flowProcessor, error) {
	return newProcessorWithClient(set, cfg, next, clk, newClient)
}

func newProcessorWithClient(set processor.Settings, cfg *Config, next consumer.Logs, clk clock, client clientFunc) (*flowProcessor, error) {
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &flowProcessor{
		cfg: cfg, next: next, logger: set.Logger, tel: tel, clock: clk, version: set.BuildInfo.Version,
		out:        &sender{next: next, tel: tel, logger: set.Logger, limit: cfg.MaxRecords},
		background: newBackgroundSends(),
		stop:       make(chan struct{}), done: make(chan struct{}),
	}
	if cfg.Kubernetes.HasValue() {
		p.identity = newIdentity(cfg.Kubernetes.Get(), set.Logger, client, clk.Now)
	}
	p.decoded.New = newDecodeBuffer
	if cfg.Mode == ModeAggregate {
		p.table = aggregate.New(aggregate.Settings{
			ActiveTimeout:   cfg.ActiveTimeout,
			InactiveTimeout: cfg.InactiveTimeout,
			PairingTimeout:  cfg.pairingTimeout(),
			MaxRecords:      cfg.MaxRecords,
			RecycleLabels:   true, // decodeAll's maps are the table's once added
		})
		p.table.OnRelayFolded = func(why aggregate.Reason) {
			p.tel.ProcessorFlowCorrelationRecordsRelayFolded.Add(context.Background(), 1, withReason(why.String()))
		}
		p.table.OnPaired = func(wait time.Duration) {
			p.paired++ // counted once per batch
			p.tel.ProcessorFlowCorrelationPairingDuration.Record(context.Background(), wait.Seconds())
		}
		p.table.OnLate = func(duplicate bool) {
			kind := lateReordered
			if duplicate {
				kind = lateDuplicate
			}
			p.tel.ProcessorFlowCorrelationRecordsLate.Add(context.Background(), 1, kind)
		}
		p.table.OnStale = func() { p.tel.ProcessorFlowCorrelationRecordsLate.Add(context.Background(), 1, lateReplaced) }
		p.table.OnAlreadyReported = func() {
			p.tel.ProcessorFlowCorrelationRecordsLate.Add(context.Background(), 1, lateReported)
		}
		p.table.OnReplaced = func() { p.tel.ProcessorFlowCorrelationConnectionsReplaced.Add(context.Background(), 1) }
		p.tick = tickInterval(cfg)
	}
	return p, nil
}

// tickInterval is how often timers are checked: every second, as Antrea's
// Flow Aggregator, or more often when a timeout is shorter than a few seconds.
func tickInterval(cfg *Config) time.Duration {
	shortest := min(cfg.ActiveTimeout, cfg.InactiveTimeout, cfg.pairingTimeout())
	return max(min(time.Second, shortest/4), time.Millisecond)
}

func (p *flowProcessor) Capabilities() consumer.Capabilities {
	// Proxy mode rewrites records in place; aggregate mode only reads its input.
	return consumer.Capabilities{MutatesData: p.cfg.Mode == ModeProxy}
}

// Start runs the gateway's Kubernetes index, when configured, and the timer
// goroutine of aggregate mode.
func (p *flowProcessor) Start(ctx context.Context, _ component.Host) error {
	if p.identity != nil {
		if err := p.identity.start(ctx); err != nil {
			return err
		}
	}
	if p.table != nil && p.started.CompareAndSwap(false, true) {
		go p.timerLoop()
	}
	return nil
}

// Shutdown stops the timers, exports everything held and makes a last
// attempt at records waiting for a retry.
func (p *flowProcessor) Shutdown(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		close(p.stop)
		if p.started.Load() {
			select {
			case <-p.done:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if werr := p.background.wait(ctx); werr != nil {
			err = werr
		}
		if p.table != nil {
			p.flush(ctx)
		}
		p.out.retryDue(ctx, p.clock.Now(), true)
		if p.identity != nil {
			p.identity.shutdown()
		}
		p.tel.Shutdown()
	})
	return err
}

func (p *flowProcessor) timerLoop() {
	defer close(p.done)
	t := p.clock.NewTicker(p.tick)
	defer t.Stop()
	ctx := context.Background()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C():
			p.onTick(ctx)
		}
	}
}

// onTick exports what the timers made due and retries refused records.
func (p *flowProcessor) onTick(ctx context.Context) {
	now := p.sweep(ctx, p.table.Expire)
	p.out.retryDue(ctx, now, false)
}

func (p *flowProcessor) flush(ctx context.Context) {
	p.sweep(ctx, p.table.Flush)
}

// sweep runs one of the table's sweeps (Expire, Flush) under the lock at the
// clock's time, updates the gauges and sends what the sweep exported; it
// returns that time.
func (p *flowProcessor) sweep(ctx context.Context, run func(now time.Time, emit aggregate.Emit)) time.Time {
	b := newBatch(metadata.ScopeName, p.version, 0)
	p.mu.Lock()
	now := p.clock.Now()
	run(now, p.emitter(ctx, b))
	p.updateGauges()
	p.mu.Unlock()
	p.out.send(ctx, b, now)
	return now
}

// emitter encodes the table's exports into b and counts what they mean.
func (p *flowProcessor) emitter(ctx context.Context, b *batch) aggregate.Emit {
	return func(r *flowrecord.Record, why aggregate.Reason) {
		if p.identity != nil {
			p.filled = *r
			r = &p.filled
			p.identity.fill(r)
		}
		b.add(r)
		if r.Correlation == flowrecord.CorrelationUnpaired && why != aggregate.ReasonActiveTimeout && why != aggregate.ReasonInactive {
			p.tel.ProcessorFlowCorrelationRecordsUnpaired.Add(ctx, 1, withReason(why.String()))
		}
		if why == aggregate.ReasonEvicted {
			p.tel.ProcessorFlowCorrelationRecordsEarlyExported.Add(ctx, 1)
		}
	}
}

func (p *flowProcessor) updateGauges() {
	p.tel.pending.Store(int64(p.table.Pending()))
	p.tel.held.Store(int64(p.table.Len()))
}

// ConsumeLogs takes a batch of flow records from the node collectors.
func (p *flowProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if p.table == nil {
		return p.proxy(ctx, ld)
	}
	return p.aggregate(ctx, ld)
}

// aggregate folds the batch into the table and emits what became ready
// (pairs, records that need no pairing). The batch itself is consumed: a
// downstream refusal is retried by the processor, not returned. A sender
// with a deadline is answered before it, folded in or refused whole
// (answer.go).
func (p *flowProcessor) aggregate(ctx context.Context, ld plog.Logs) error {
	by, deadline := answerBy(ctx, time.Now())
	if deadline && !p.background.acquire(ctx, by) {
		return p.refuse(ctx, ld)
	}
	buf := p.decoded.Get().(*decodeBuffer)
	recs, counts := p.decodeAll(ld, buf)
	// A record emits one export at most, but for a connection it replaces
	// or one the bound evicts.
	b := newBatch(metadata.ScopeName, p.version, len(recs))
	p.mu.Lock()
	if deadline && (ctx.Err() != nil || !time.Now().Before(by)) {
		// The lock came too late (a long sweep held it).
		p.mu.Unlock()
		p.background.release()
		clear(recs)
		buf.recs = recs[:0]
		p.decoded.Put(buf)
		return p.refuse(ctx, ld)
	}
	counts.add(ctx, p.tel)
	now := p.clock.Now()
	emit := p.emitter(ctx, b)
	for i := range recs {
		p.table.Add(&recs[i], now, emit)
	}
	if p.paired > 0 {
		p.tel.ProcessorFlowCorrelationPairs.Add(ctx, p.paired)
		p.paired = 0
	}
	p.updateGauges()
	buf.refill(p.table, len(recs))
	p.mu.Unlock()
	clear(recs) // drop references to labels maps before pooling
	buf.recs = recs[:0]
	p.decoded.Put(buf)
	switch {
	case !deadline:
		p.out.send(ctx, b, now)
	case b.len() == 0:
		p.background.release()
	default:
		p.background.run(ctx, by, func() { p.out.send(context.WithoutCancel(ctx), b, now) })
	}
	return nil
}

// refuse counts a batch refused before it was folded in, and says why.
func (p *flowProcessor) refuse(ctx context.Context, ld plog.Logs) error {
	p.tel.ProcessorFlowCorrelationRecordsRefused.Add(ctx, int64(ld.LogRecordCount()))
	return errRefusedAtDeadline
}

// decodeCounts are what decodeAll counted, added to the telemetry once the
// batch is folded in (a refused one is counted when it comes again).
type decodeCounts struct {
	received    int64
	undecodable int64
	untimed     int64
}

func (c decodeCounts) add(ctx context.Context, tel *telemetry) {
	tel.ProcessorFlowCorrelationRecordsReceived.Add(ctx, c.received)
	if c.undecodable > 0 {
		tel.ProcessorFlowCorrelationRecordsDropped.Add(ctx, c.undecodable, withReason(reasonDecodeError))
	}
	if c.untimed > 0 {
		tel.ProcessorFlowCorrelationRecordsDropped.Add(ctx, c.untimed, withReason(reasonMissingTimestamp))
	}
}

// decodeAll decodes every record of ld into buf. A record that fails is
// logged with the attribute at fault, and left out alone.
func (p *flowProcessor) decodeAll(ld plog.Logs, buf *decodeBuffer) ([]flowrecord.Record, decodeCounts) {
	var counts decodeCounts
	recs := slices.Grow(buf.recs[:0], ld.LogRecordCount())
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		cluster := clusterUID(rls.At(i).Resource())
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			lrs := sls.At(j).LogRecords()
			for k := range lrs.Len() {
				counts.received++
				recs = append(recs, flowrecord.Record{})
				r := &recs[len(recs)-1]
				buf.lend(r)
				why := p.decodeOne(lrs.At(k), r, &buf.dec)
				buf.settle(r)
				switch why {
				case "":
					recs[len(recs)-1].ClusterUID = cluster
					continue
				case reasonDecodeError:
					counts.undecodable++
				default:
					counts.untimed++
				}
				recs = recs[:len(recs)-1]
			}
		}
	}
	return recs, counts
}

// clusterUID is the k8s.cluster.uid of a resource ("" when absent): the
// aggregate output keeps each record under its cluster's resource.
func clusterUID(res pcommon.Resource) string {
	if v, ok := res.Attributes().Get(catalogue.ResourceClusterUID); ok {
		return v.AsString()
	}
	return ""
}

// decodeOne decodes lr into r, with dec when it is not nil (see
// attrcodec.Decoder); it returns "" when r can be used, else why not (the
// drop reason, logged here, counted by the caller).
func (p *flowProcessor) decodeOne(lr plog.LogRecord, r *flowrecord.Record, dec *attrcodec.Decoder) string {
	var err error
	if dec != nil {
		err = dec.Decode(lr, r)
	} else {
		err = attrcodec.Decode(lr, r)
	}
	if err != nil {
		p.logger.Error("dropping a flow record that does not decode", zap.Error(err))
		return reasonDecodeError
	}
	if p.table != nil && r.End.IsZero() {
		// Without an end time there is no ordering and no throughput (Antrea drops these too).
		p.logger.Error("dropping a flow record without an end time (LogRecord Timestamp is 0)",
			zap.String("flow.key", r.Key))
		return reasonMissingTimestamp
	}
	return ""
}

// proxy rewrites each record in place with its flow direction and original
// exporter, and passes the batch on; errors go back to the sender, since
// nothing is held.
func (p *flowProcessor) proxy(ctx context.Context, ld plog.Logs) error {
	peer := peerAddress(ctx)
	var r flowrecord.Record
	var received int64
	var byState [4]int64
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		if p.identity != nil {
			p.identity.nameResource(rls.At(i))
		}
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			sls.At(j).LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				received++
				if why := p.decodeOne(lr, &r, nil); why != "" {
					p.tel.ProcessorFlowCorrelationRecordsDropped.Add(ctx, 1, withReason(why))
					return true
				}
				r.Direction = flowDirection(&r) // from what the Node said, as Antrea
				if p.identity != nil {
					p.identity.fill(&r) // the resource carries the cluster UID
				}
				if !r.Origin.ExporterAddress.IsValid() {
					r.Origin.ExporterAddress = peer
				}
				if r.Reporter.Side == flowrecord.SideRelay {
					// A copy of its Node's destination half, only for pairing.
					p.tel.ProcessorFlowCorrelationRecordsRelayFolded.Add(ctx, 1, withReason(ModeProxy))
					return true
				}
				attrcodec.Encode(&r, lr)
				if int(r.Correlation) < len(byState) {
					byState[r.Correlation]++
				}
				return false
			})
		}
	}
	p.tel.ProcessorFlowCorrelationRecordsReceived.Add(ctx, received)
	n := ld.LogRecordCount()
	if n == 0 {
		return nil
	}
	if err := p.next.ConsumeLogs(ctx, ld); err != nil {
		p.tel.ProcessorFlowCorrelationRecordsFailed.Add(ctx, int64(n), withReason(reasonDownstreamError))
		return err
	}
	for st, c := range byState {
		if c > 0 {
			p.tel.ProcessorFlowCorrelationRecordsEmitted.Add(ctx, c, stateOption(flowrecord.CorrelationState(st)))
		}
	}
	return nil
}
