package k8sflowprocessor

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/recordform"
	"github.com/flowtel/flowtel/internal/k8sindex"
	"github.com/flowtel/flowtel/processor/k8sflowprocessor/internal/metadata"
)

type k8sFlowProcessor struct {
	cfg       *Config
	logger    *zap.Logger
	ix        *k8sindex.Index
	client    clientFunc
	informers *k8sindex.Informers
	tel       *metadata.TelemetryBuilder
	cluster   k8sindex.ClusterName
	// synced is set once every cache has been filled; before (only with
	// wait_for_sync: false) records cannot be classified and are dropped.
	synced atomic.Bool
	// next receives the held records when they are released (nil in tests
	// that call enrich directly: then nothing is held).
	next consumer.Logs
	// hold keeps records whose local endpoint is not resolved yet (nil
	// with hold_unresolved: 0).
	hold *holdBuffer
	// policies counts the policy verdicts of enrich (network_policies).
	policies policyCounts
	// encode writes a record in the configured encoding.
	encode func(*flowrecord.Record, plog.LogRecord)
}

func newProcessor(set processor.Settings, cfg *Config, client clientFunc, now func() time.Time) (*k8sFlowProcessor, error) {
	ix := k8sindex.New(k8sindex.Options{
		Now:                 now,
		NodeName:            cfg.NodeName,
		AllPods:             cfg.Pods == PodsAll,
		PodLabels:           cfg.PodLabels,
		NetworkPolicies:     cfg.NetworkPolicies,
		DeletedPodRetention: cfg.DeletedPodRetention,
	})
	tel, err := newTelemetry(set.TelemetrySettings, ix)
	if err != nil {
		return nil, err
	}
	encode, _ := recordform.Encoder(cfg.Encoding) // Validate checked the name
	p := &k8sFlowProcessor{cfg: cfg, logger: set.Logger, ix: ix, client: client, tel: tel, encode: encode}
	if cfg.HoldUnresolved > 0 {
		p.hold = &holdBuffer{max: cfg.HoldMaxRecords, wait: cfg.HoldUnresolved}
	}
	return p, nil
}

func (p *k8sFlowProcessor) start(ctx context.Context, _ component.Host) error {
	client, err := p.client(p.cfg)
	if err != nil {
		return err
	}
	inf, err := k8sindex.Run(ctx, p.ix, client, p.logger, p.cfg.WaitForSync, p.cfg.WaitForSyncTimeout)
	if err != nil {
		return err
	}
	p.informers = inf
	if err := p.cluster.Start(ctx, p.cfg.ClusterUID, p.cfg.WaitForSync, p.cfg.WaitForSyncTimeout, client, p.logger); err != nil {
		return err
	}
	p.synced.Store(inf.HasSynced())
	p.startHold()
	p.logger.Info("Kubernetes caches started", zap.String("node", p.cfg.NodeName), zap.String("pods", p.cfg.Pods), zap.Bool("synced", p.cfg.WaitForSync))
	return nil
}

func (p *k8sFlowProcessor) shutdown(ctx context.Context) error {
	p.shutdownHold(ctx)
	p.cluster.Stop()
	if p.informers != nil {
		p.informers.Shutdown()
		p.informers = nil
	}
	p.tel.Shutdown()
	return nil
}

// batchCounts are added to the counters once per batch.
type batchCounts struct {
	received, enriched, noLocal, noNode, notSynced, decode, unresolved int64
	// records that left the hold, by outcome
	heldResolved, heldExpired, heldShed, heldFlushed int64
}

// settle counts an enriched record; false when it must be dropped.
func (c *batchCounts) settle(reason string, unresolved int) bool {
	c.unresolved += int64(unresolved)
	switch reason {
	case "":
		c.enriched++
		return true
	case reasonNoLocalEndpoint:
		c.noLocal++
	default:
		c.noNode++
	}
	return false
}

func (p *k8sFlowProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	if !p.synced.Load() {
		if inf := p.informers; inf == nil || !inf.HasSynced() {
			n := int64(ld.LogRecordCount())
			p.record(ctx, &batchCounts{received: n, notSynced: n})
			return ld, processorhelper.ErrSkipProcessingData
		}
		p.synced.Store(true)
	}
	var (
		rec       flowrecord.Record
		relays    []flowrecord.Record // onward legs of the scope's records, appended to it
		c         batchCounts
		decodeErr error
		now       = time.Now()
	)
	ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		p.nameCluster(rl)
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			relays = relays[:0]
			var origin *heldOrigin
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				c.received++
				if err := attrcodec.Decode(lr, &rec); err != nil {
					c.decode++
					decodeErr = err
					return true
				}
				reason, unresolved := p.enrich(&rec)
				if reason == "" && p.hold != nil && localUnresolved(&rec) {
					if origin == nil {
						origin = newHeldOrigin(rl, sl)
					}
					if p.hold.add(origin, lr, &rec, now) {
						return true // counted when it leaves the hold
					}
					c.heldShed++
				}
				if !c.settle(reason, unresolved) {
					return true
				}
				p.encode(&rec, lr)
				if relay, ok := relayLeg(&rec); ok {
					relays = append(relays, relay)
				}
				return false
			})
			for i := range relays {
				p.encode(&relays[i], sl.LogRecords().AppendEmpty())
				c.enriched++
			}
			return sl.LogRecords().Len() == 0
		})
		return rl.ScopeLogs().Len() == 0
	})
	p.record(ctx, &c)
	if decodeErr != nil {
		p.logger.Warn("Dropped records that are not flow records", zap.Int64("count", c.decode), zap.Error(decodeErr))
	}
	if c.noNode > 0 {
		p.logger.Warn("Dropped records: no node_name configured and none on the record", zap.Int64("count", c.noNode))
	}
	if ld.LogRecordCount() == 0 {
		return ld, processorhelper.ErrSkipProcessingData
	}
	return ld, nil
}

func (p *k8sFlowProcessor) record(ctx context.Context, c *batchCounts) {
	t := p.tel
	t.ProcessorK8sFlowRecordsReceived.Add(ctx, c.received)
	if c.enriched > 0 {
		t.ProcessorK8sFlowRecordsEnriched.Add(ctx, c.enriched)
	}
	if c.noLocal > 0 {
		t.ProcessorK8sFlowRecordsDropped.Add(ctx, c.noLocal, dropNoLocal)
	}
	if c.noNode > 0 {
		t.ProcessorK8sFlowRecordsDropped.Add(ctx, c.noNode, dropNoNode)
	}
	if c.decode > 0 {
		t.ProcessorK8sFlowRecordsDropped.Add(ctx, c.decode, dropDecode)
	}
	if c.notSynced > 0 {
		t.ProcessorK8sFlowRecordsDropped.Add(ctx, c.notSynced, dropNotSynced)
	}
	if c.unresolved > 0 {
		t.ProcessorK8sFlowAddressesUnresolved.Add(ctx, c.unresolved, unknownPod)
	}
	p.policies.record(ctx, t.ProcessorK8sFlowPolicyVerdicts)
	for _, h := range []struct {
		n   int64
		set metric.MeasurementOption
	}{{c.heldResolved, heldResolved}, {c.heldExpired, heldExpired}, {c.heldShed, heldShed}, {c.heldFlushed, heldFlushed}} {
		if h.n > 0 {
			t.ProcessorK8sFlowRecordsHeld.Add(ctx, h.n, h.set)
		}
	}
}

// enrich names both endpoints and the Service, classifies the flow, decides
// the reported side and sets the correlation key. A non-empty reason means
// the record must be dropped; unresolved counts endpoint addresses in a
// podCIDR that no known Pod owned.
func (p *k8sFlowProcessor) enrich(r *flowrecord.Record) (reason string, unresolved int) {
	local := p.cfg.NodeName
	if local == "" {
		local = r.Reporter.NodeName
	}
	if local == "" {
		return reasonNoNodeName, 0
	}
	v := p.ix.Read()
	if v.ResolveEndpoint(&r.Source, r.Start) == k8sindex.ResolvedPodSubnet && r.Source.PodName == "" {
		unresolved++
	}
	if v.ResolveEndpoint(&r.Destination, r.Start) == k8sindex.ResolvedPodSubnet && r.Destination.PodName == "" {
		unresolved++
	}
	r.Service = flowrecord.Service{}
	if r.DNATed() {
		if sp := v.Service(r.OriginalDestinationAddress, r.OriginalDestinationPort, r.Protocol); sp != nil {
			r.Service = flowrecord.Service{PortName: sp.PortName, UID: sp.UID, Address: r.OriginalDestinationAddress, Port: r.OriginalDestinationPort}
		}
	}
	if p.cfg.NetworkPolicies {
		p.attributePolicies(v, r, local)
	}
	v.Done()

	r.FlowType = flowType(&r.Source, &r.Destination)
	if receivedFromNode(r, local) && r.Destination.Kind.InCluster() {
		// A Pod calling another Node's NodePort whose endpoint runs back on
		// the caller's Node still went from one Node to the other.
		r.FlowType = flowrecord.FlowTypeInterNode
	}
	side := reportedSide(r, local)
	if side == flowrecord.SideUnknown {
		return reasonNoLocalEndpoint, unresolved
	}
	r.Reporter = flowrecord.Reporter{NodeName: local, Side: side}
	r.Key = r.CorrelationKey()
	return "", unresolved
}
