package conntrackreceiver

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/tick"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/deny"
)

const (
	// nflogCopyRange is how much of each logged packet the kernel copies:
	// the IP header with its extensions and the transport ports, never the
	// payload.
	nflogCopyRange = 128
	// deniedTick is the export loop's period: the resolution of the denied
	// idle and active timeouts.
	deniedTick = time.Second
)

// denied is the denied-connection path: an NFLOG subscription whose packets
// become one record per 5-tuple (package deny), exported by a loop of its
// own.
type denied struct {
	cfg   DeniedConfig
	store *deny.Store
	// sock is the subscription until runNFLOG takes it over.
	sock *ctsource.NFLOG
	// withCT: the kernel sends each packet's conntrack entry.
	withCT bool

	// Reader state (runNFLOG's goroutine only).
	lastSeq uint32
	haveSeq bool
	counts  [5]int64 // per deniedOutcomes index

	// evicted is the store's Evicted count already counted (export loop,
	// then shutdown).
	evicted uint64
}

// deniedOutcomes are the reason attributes of
// receiver_conntrack_denied_packets, indexed by deny.Outcome; the last one
// counts sequence gaps.
var deniedOutcomes = [...]metric.MeasurementOption{
	deny.Accounted: reason("accounted"), deny.RateLimited: reason("rate_limited"),
	deny.MaxRecords: reason("max_records"), deny.Undecodable: reason("undecodable"),
	outcomeLost: reason("lost"),
}

const outcomeLost = deny.Undecodable + 1

// openDenied subscribes to the configured NFLOG group; Start fails when it
// cannot (the group is taken, no permission, no nfnetlink_log).
func (r *conntrackReceiver) openDenied() error {
	cfg := *r.cfg.Denied.Get()
	sock, err := ctsource.ListenNFLOG(r.ns, cfg.NFLOGGroup, nflogCopyRange)
	if err != nil {
		return err
	}
	if !sock.Conntrack() {
		r.logger.Warn("NFLOG packets come without their conntrack entry (the kernel lacks CONFIG_NETFILTER_NETLINK_GLUE_CT): denied records carry the dropped packet's destination as original destination, and no zone, mark or labels",
			zap.Uint16("nflog_group", cfg.NFLOGGroup))
	}
	active, idle := r.cfg.deniedTimeouts()
	r.denied = &denied{cfg: cfg, sock: sock, withCT: sock.Conntrack(), store: deny.New(deny.Config{
		IdleTimeout: idle, ActiveTimeout: active, Linger: deniedLinger(r.ns, r.cfg.SysctlPath),
		MaxRecords: cfg.MaxRecords, MaxRate: cfg.MaxRate,
	})}
	return nil
}

// lingerSysctls are the conntrack timeouts of unanswered entries, in the
// order of deniedLinger's fields.
var lingerSysctls = [...]string{
	"netfilter/nf_conntrack_tcp_timeout_syn_sent", "netfilter/nf_conntrack_udp_timeout",
	"netfilter/nf_conntrack_icmp_timeout", "netfilter/nf_conntrack_sctp_timeout_cookie_wait",
	"netfilter/nf_conntrack_generic_timeout",
}

// deniedLinger is how long a denied connection is remembered after its last
// packet, by protocol: the namespace's conntrack timeouts of an unanswered
// entry (what the source Node's conntrack keeps the same attempt for, on
// Nodes configured alike), the kernel's defaults where they cannot be read.
func deniedLinger(ns *ctsource.Namespace, sysctlPath string) deny.Linger {
	l := deny.DefaultLinger
	vals, ok := ctsource.SysctlInts(ns, sysctlPath, lingerSysctls[:]...)
	for i, d := range []*time.Duration{&l.TCP, &l.UDP, &l.ICMP, &l.SCTP, &l.Other} {
		if ok[i] && vals[i] > 0 {
			*d = time.Duration(vals[i]) * time.Second
		}
	}
	return l
}

// startDenied runs the NFLOG reader and the export loop.
func (r *conntrackReceiver) startDenied(ctx context.Context) {
	sock := r.denied.sock
	r.denied.sock = nil
	r.wg.Add(2)
	go r.runNFLOG(ctx, sock)
	go r.runDeniedExports(ctx)
}

// closeDenied closes a subscription no goroutine took over (Start failed).
func (r *conntrackReceiver) closeDenied() error {
	if r.denied == nil || r.denied.sock == nil {
		return nil
	}
	err := r.denied.sock.Close()
	r.denied.sock = nil
	return err
}

// runNFLOG reads logged packets into the store until shutdown. ENOBUFS (the
// kernel had no room in the socket) is counted and reading goes on; the
// packets lost are counted from the sequence gap. Any other failure is
// counted and the group subscribed again.
func (r *conntrackReceiver) runNFLOG(ctx context.Context, sock *ctsource.NFLOG) {
	defer r.wg.Done()
	d := r.denied
	for {
		stop := context.AfterFunc(ctx, func() { sock.Close() })
		err := r.readNFLOG(ctx, sock)
		stop()
		sock.Close()
		if ctx.Err() != nil {
			return
		}
		r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedNFLOG)
		r.logger.Warn("NFLOG socket failed; subscribing again", zap.Uint16("nflog_group", d.cfg.NFLOGGroup), zap.Error(err))
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(eventRetryDelay):
			}
			if sock, err = ctsource.ListenNFLOG(r.ns, d.cfg.NFLOGGroup, nflogCopyRange); err == nil {
				d.haveSeq = false // a new subscription numbers from 0
				break
			}
			r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedNFLOG)
		}
	}
}

// readNFLOG reads until the socket fails with anything but ENOBUFS.
func (r *conntrackReceiver) readNFLOG(ctx context.Context, sock *ctsource.NFLOG) error {
	d := r.denied
	for {
		err := sock.Receive(d.account)
		d.flushCounts(ctx, r)
		if err == nil {
			continue
		}
		if ctx.Err() != nil || !ctsource.IsNoBufs(err) {
			return err
		}
		r.tel.ReceiverConntrackNetlinkErrors.Add(ctx, 1, failedENOBUFS)
	}
}

// account adds one logged packet to the store and counts its outcome and
// any gap in the sequence numbers before it.
func (d *denied) account(p *ctsource.LoggedPacket) {
	if p.HasSeq {
		if gap := p.Seq - d.lastSeq - 1; d.haveSeq && gap != 0 && gap < 1<<31 {
			d.counts[outcomeLost] += int64(gap)
		}
		d.lastSeq, d.haveSeq = p.Seq, true
	}
	var ct *deny.Conntrack
	if p.HasCT {
		ct = &p.CT
	}
	d.counts[d.store.Add(p.Payload, p.Prefix, ct, time.Now())]++
}

func (d *denied) flushCounts(ctx context.Context, r *conntrackReceiver) {
	for i, n := range d.counts {
		if n > 0 {
			r.tel.ReceiverConntrackDeniedPackets.Add(ctx, n, deniedOutcomes[i])
			d.counts[i] = 0
		}
	}
}

// runDeniedExports sends the denied records due every deniedTick.
func (r *conntrackReceiver) runDeniedExports(ctx context.Context) {
	defer r.wg.Done()
	var xs []deny.Export
	tick.Every(ctx, deniedTick, func(time.Time) {
		now := r.now()
		xs = r.denied.store.Expired(now, xs[:0])
		r.sendDenied(ctx, xs, now)
		r.tel.ReceiverConntrackDeniedConnections.Record(ctx, int64(r.denied.store.Len()))
		r.denied.countEvicted(ctx, r)
	})
}

// flushDenied, at shutdown once both goroutines are done, sends every denied
// connection's packets not yet reported.
func (r *conntrackReceiver) flushDenied(ctx context.Context) {
	if r.denied == nil {
		return
	}
	now := r.now()
	r.denied.countEvicted(ctx, r)
	xs := r.denied.store.Flush(now, nil)
	r.sendDenied(ctx, xs, now)
	r.tel.ReceiverConntrackDeniedConnections.Record(ctx, 0)
}

// countEvicted counts the lingering connections the store evicted since the
// previous call (the export loop's, then the shutdown flush's).
func (d *denied) countEvicted(ctx context.Context, r *conntrackReceiver) {
	if n := d.store.Evicted(); n != d.evicted {
		r.tel.ReceiverConntrackDeniedLingeringEvicted.Add(ctx, int64(n-d.evicted))
		d.evicted = n
	}
}

func (r *conntrackReceiver) sendDenied(ctx context.Context, xs []deny.Export, now time.Time) {
	var rec flowrecord.Record
	for i := 0; i < len(xs); i += maxRecordsPerBatch {
		batch := xs[i:min(len(xs), i+maxRecordsPerBatch)]
		ld, lrs := r.newLogs(len(batch))
		for j := range batch {
			toDeniedRecord(&batch[j], r.node, now, &rec)
			r.encode(&rec, lrs.AppendEmpty())
		}
		if r.consume(ctx, ld, len(batch)) {
			r.tel.ReceiverConntrackDeniedRecords.Add(ctx, int64(len(batch)))
		}
	}
}

// toDeniedRecord writes one denied connection's export as a flow record, as
// Antrea's deny connection store does: the packets' counters in the original
// direction, reverse counters 0, no TCP state, end reason end of flow, and
// the rule's action on the policy of its direction (which policy isolated
// the Pod is for policy evaluation to name). The destination is the one the
// dropped packet carried (post-DNAT where the rule ran after DNAT), the
// original destination, zone, mark and labels its conntrack entry's.
func toDeniedRecord(x *deny.Export, node string, now time.Time, rec *flowrecord.Record) {
	*rec = flowrecord.Record{
		Start: x.Start, End: x.Last, Observed: now,
		Protocol:                   x.Proto,
		Source:                     flowrecord.Endpoint{Address: x.Src, Port: x.SrcPort},
		Destination:                flowrecord.Endpoint{Address: x.Dst, Port: x.DstPort},
		OriginalDestinationAddress: x.OrigDst,
		OriginalDestinationPort:    x.OrigDstPort,
		Stats: flowrecord.Counters{PacketTotal: x.Packets, OctetTotal: x.Bytes,
			PacketDelta: x.PacketDelta, OctetDelta: x.OctetDelta},
		EndReason: flowrecord.EndReasonEndOfFlow,
		ICMP:      flowrecord.ICMP{Type: x.ICMPType, Code: x.ICMPCode, ID: x.ICMPID},
		Conntrack: flowrecord.Conntrack{Zone: x.Zone, Mark: x.Mark, Labels: x.Labels},
		Reporter:  flowrecord.Reporter{NodeName: node},
	}
	p := flowrecord.Policy{RuleAction: x.Action}
	if x.Egress {
		rec.EgressPolicy = p
	} else {
		rec.IngressPolicy = p
	}
}
