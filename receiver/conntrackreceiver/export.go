package conntrackreceiver

// Export: the store's due records as flow records, in batches, to the next
// consumer; what was accepted is saved to the checkpoint.

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

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
		r.encode(&rec, lrs.AppendEmpty())
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
