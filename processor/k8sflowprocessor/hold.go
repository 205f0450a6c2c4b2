package k8sflowprocessor

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/tick"
)

// A Pod's status.podIPs reaches the API after the kubelet's next status
// update, often after the Pod's first connections. A record whose endpoint
// lies in this Node's podCIDR but that no known Pod owns yet is therefore
// held back and resolved again, against the connection's start (D7): the
// Index attributes an IP that arrives late to the Pod from its creation on,
// so the Pod is still the owner. After hold_unresolved it is exported
// unresolved; a full hold exports at once; Shutdown flushes it. Each way out
// is counted (processor_k8s_flow_records_held, by outcome).

// maxRetryInterval is how often held records are resolved again at most.
const maxRetryInterval = 100 * time.Millisecond

// heldOrigin is the resource and scope of the batch a held record came in
// with: an empty copy, shared by the records held from one scope.
type heldOrigin struct{ rl plog.ResourceLogs }

func newHeldOrigin(rl plog.ResourceLogs, sl plog.ScopeLogs) *heldOrigin {
	o := plog.NewResourceLogs()
	rl.Resource().CopyTo(o.Resource())
	o.SetSchemaUrl(rl.SchemaUrl())
	osl := o.ScopeLogs().AppendEmpty()
	sl.Scope().CopyTo(osl.Scope())
	osl.SetSchemaUrl(sl.SchemaUrl())
	return &heldOrigin{o}
}

type heldRecord struct {
	origin *heldOrigin
	lr     plog.LogRecord // a copy of the record as it came in; re-encoded on release
	rec    flowrecord.Record
	until  time.Time
}

// holdBuffer holds the records; it only accepts records between start and
// shutdown.
type holdBuffer struct {
	mu   sync.Mutex
	open bool
	recs []heldRecord
	max  int
	wait time.Duration

	stop context.CancelFunc // ends the retries; nil when they do not run
	done chan struct{}
}

// add holds a copy of lr with its decoded record; false when the hold is
// full or closed (the caller exports the record as it is).
func (h *holdBuffer) add(origin *heldOrigin, lr plog.LogRecord, rec *flowrecord.Record, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.open || len(h.recs) >= h.max {
		return false
	}
	c := plog.NewLogRecord()
	lr.CopyTo(c)
	h.recs = append(h.recs, heldRecord{origin: origin, lr: c, rec: *rec, until: now.Add(h.wait)})
	return true
}

// localUnresolved reports whether an endpoint of the enriched record r lies
// in its reporter Node's podCIDR without a Pod name.
func localUnresolved(r *flowrecord.Record) bool {
	pending := func(e *flowrecord.Endpoint) bool {
		return e.Kind == flowrecord.EndpointPod && e.PodName == "" && e.NodeName == r.Reporter.NodeName
	}
	return pending(&r.Source) || pending(&r.Destination)
}

// startHold opens the hold and resolves its records again until shutdownHold.
func (p *k8sFlowProcessor) startHold() {
	h := p.hold
	if h == nil {
		return
	}
	if p.next == nil { // tests that call processLogs directly
		p.hold = nil
		return
	}
	h.mu.Lock()
	h.open = true
	h.mu.Unlock()
	ctx, stop := context.WithCancel(context.Background())
	h.stop, h.done = stop, make(chan struct{})
	go func() {
		defer close(h.done)
		tick.Every(ctx, min(h.wait, maxRetryInterval), func(now time.Time) { p.retry(context.Background(), now, false) })
	}()
}

// shutdownHold stops the retries and exports what is still held.
func (p *k8sFlowProcessor) shutdownHold(ctx context.Context) {
	h := p.hold
	if h == nil || h.stop == nil {
		return
	}
	h.stop()
	<-h.done
	h.stop = nil
	h.mu.Lock()
	h.open = false
	h.mu.Unlock()
	p.retry(ctx, time.Now(), true)
}

// retry resolves every held record again and exports those that resolved,
// those whose time is up, and, when final, all the others.
func (p *k8sFlowProcessor) retry(ctx context.Context, now time.Time, final bool) {
	h := p.hold
	var (
		c   batchCounts
		out []heldRecord
	)
	h.mu.Lock()
	kept := h.recs[:0]
	for _, r := range h.recs {
		reason, unresolved := p.enrich(&r.rec)
		switch {
		case reason != "" || !localUnresolved(&r.rec):
			c.heldResolved++
		case final:
			c.heldFlushed++
		case !now.Before(r.until):
			c.heldExpired++
		default:
			kept = append(kept, r)
			continue
		}
		if c.settle(reason, unresolved) {
			out = append(out, r)
		}
	}
	clear(h.recs[len(kept):])
	h.recs = kept
	h.mu.Unlock()
	if len(out) > 0 {
		ld := plog.NewLogs()
		var (
			last *heldOrigin
			sl   plog.ScopeLogs
		)
		for i := range out {
			r := &out[i]
			if r.origin != last {
				rl := ld.ResourceLogs().AppendEmpty()
				r.origin.rl.CopyTo(rl)
				sl, last = rl.ScopeLogs().At(0), r.origin
			}
			p.encode(&r.rec, r.lr)
			r.lr.MoveTo(sl.LogRecords().AppendEmpty())
			if relay, ok := relayLeg(&r.rec); ok {
				p.encode(&relay, sl.LogRecords().AppendEmpty())
				c.enriched++
			}
		}
		if err := p.next.ConsumeLogs(ctx, ld); err != nil {
			p.logger.Warn("Exporting held records failed", zap.Int("count", ld.LogRecordCount()), zap.Error(err))
		}
	}
	p.record(ctx, &c)
}
