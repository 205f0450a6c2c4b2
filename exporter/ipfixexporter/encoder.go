package ipfixexporter

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
)

// encoder turns one batch of log records into finished data messages, without
// touching the connection: several sending-queue consumers encode their batches
// in parallel and only the writes are serialised. An encoder owns its
// templates' reusable data records and its scratch record; it is used by one
// push at a time (the exporter keeps a free list).
type encoder struct {
	e      *ipfixExporter
	v4, v6 *layout.Template
	rec    flowrecord.Record
	dec    attrcodec.Decoder // reuses rec's label maps: rec is done with before the next record
	// scratch holds the data record being encoded, copied into its message
	// once it is known to fit.
	scratch []byte
	// clusterID is the clusterId of the records under the current resource.
	clusterID string
	// open holds the message being filled per observation domain and family.
	open map[openKey]*message
	// out are the messages ready to be written, in the order they filled.
	out []*message

	lastUUID string
	lastODID uint32
}

type openKey struct {
	odid uint32
	ipv6 bool
}

func newEncoder(e *ipfixExporter) (*encoder, error) {
	v4, v6, err := layout.New(e.cfg.layoutOptions())
	if err != nil {
		return nil, err
	}
	return &encoder{e: e, v4: v4, v6: v6, open: map[openKey]*message{}}, nil
}

// encode fills enc.out from ld. Records that are not flow records, cannot be
// encoded or do not fit in a message are logged, counted and left out.
func (enc *encoder) encode(ctx context.Context, ld plog.Logs, now time.Time) {
	pos := 0
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		odid, clusterID := enc.clusterOf(rl)
		enc.clusterID = clusterID
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				enc.add(ctx, pos, lrs.At(k), odid, now)
				pos++
			}
		}
	}
	for k, m := range enc.open {
		if m.empty() {
			enc.e.putMessage(m)
		} else {
			enc.out = append(enc.out, m)
		}
		delete(enc.open, k)
	}
}

func (enc *encoder) add(ctx context.Context, pos int, lr plog.LogRecord, odid uint32, now time.Time) {
	e := enc.e
	if err := enc.dec.Decode(lr, &enc.rec); err != nil {
		e.tel.fail(ctx, reasonDecode, 1)
		e.logger.Warn("Dropping a log record that is not a valid flow record", zap.Error(err))
		return
	}
	r := &enc.rec
	r.ClusterUID = enc.clusterID // what the template writes as clusterId
	t := enc.v4
	if r.IsIPv6() {
		t = enc.v6
	}
	if e.json {
		if err := t.Fill(r); err != nil {
			enc.dropped(ctx, reasonEncode, err)
			return
		}
		enc.addJSON(ctx, pos, t, now)
		return
	}
	rec, err := t.AppendRecord(enc.scratch[:0], r)
	if cap(rec) <= 2*maxMessageSize { // not what a huge record (too large to send) grew
		enc.scratch = rec[:0]
	}
	if err != nil {
		enc.dropped(ctx, reasonEncode, err)
		return
	}
	size := len(rec)
	if headerLen+size > e.maxMsg {
		enc.dropped(ctx, reasonTooLarge, errors.New("record larger than the IPFIX message size limit"),
			zap.Int("record_bytes", size), zap.Int("max_message_size", e.maxMsg))
		return
	}
	key := openKey{odid, t.IPv6}
	m := enc.open[key]
	if m != nil && len(m.buf)+size > e.maxMsg {
		enc.out = append(enc.out, m)
		m = nil
	}
	if m == nil {
		m = e.getMessage(t.ID, odid, false)
		enc.open[key] = m
	}
	m.buf = append(m.buf, rec...)
	m.positions = append(m.positions, pos)
}

// addJSON appends the record as a JSON line. Over UDP every record is its own
// datagram, as Antrea writes them; over TCP lines are written in chunks.
func (enc *encoder) addJSON(ctx context.Context, pos int, t *layout.Template, now time.Time) {
	e := enc.e
	key := openKey{}
	m := enc.open[key]
	if m == nil {
		m = e.getMessage(0, 0, true)
		enc.open[key] = m
	}
	start := len(m.buf)
	m.buf = t.AppendJSON(m.buf, now.UTC())
	if lineLen := len(m.buf) - start; !e.stream && lineLen > maxMessageSize {
		m.buf = m.buf[:start]
		enc.dropped(ctx, reasonTooLarge, errors.New("JSON record larger than a UDP datagram"), zap.Int("bytes", lineLen))
		return
	}
	m.positions = append(m.positions, pos)
	if !e.stream || len(m.buf) >= e.maxMsg {
		enc.out = append(enc.out, m)
		delete(enc.open, key)
	}
}

func (enc *encoder) dropped(ctx context.Context, reason string, err error, fields ...zap.Field) {
	enc.e.tel.fail(ctx, reason, 1)
	r := &enc.rec
	enc.e.logger.Warn("Dropping a flow record that cannot be exported as IPFIX", append(fields, zap.Error(err),
		zap.String("reason", reason), zap.Stringer("source", r.Source.Address), zap.Stringer("destination", r.Destination.Address))...)
}

// clusterOf returns the Observation Domain ID and the clusterId value for
// records under rl's resource.
func (enc *encoder) clusterOf(rl plog.ResourceLogs) (odid uint32, clusterID string) {
	cfg := enc.e.cfg
	uuid := cfg.ClusterUUID
	if uuid == "" {
		if v, ok := rl.Resource().Attributes().Get(attrClusterUID); ok {
			uuid = v.AsString()
		}
	}
	clusterID = cfg.ClusterID
	if clusterID == "" {
		clusterID = uuid
	}
	if cfg.ObservationDomainID != nil {
		return *cfg.ObservationDomainID, clusterID
	}
	if uuid != enc.lastUUID { // the zero state holds "" -> domain 0, as observationDomain says
		enc.lastUUID, enc.lastODID = uuid, observationDomain(uuid)
	}
	return enc.lastODID, clusterID
}
