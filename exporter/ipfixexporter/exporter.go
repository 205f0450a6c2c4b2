package ipfixexporter

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Reconnect back-off, as Antrea's exporter: 1 s doubling to 30 s.
const (
	backoffInitial = time.Second
	backoffMax     = 30 * time.Second
)

// maxResend bounds the messages kept for resending after a connection died;
// beyond it the oldest are dropped and counted lost.
const maxResend = 4096

type ipfixExporter struct {
	cfg     *Config
	logger  *zap.Logger
	tel     *telemetry
	dial    dialFunc
	network string
	stream  bool
	json    bool
	maxMsg  int

	mu       sync.Mutex
	tlsCfg   *tls.Config
	v4, v6   *layout.Template
	conn     *connection
	domains  map[uint32]*domain
	inflight []inflight // written, not yet acknowledged by TCP
	resend   []inflight // unacknowledged when the last connection died
	backoff  time.Duration
	nextDial time.Time
	dialErr  error

	lastUUID string
	lastODID uint32

	// Per-push scratch, reused.
	rec     flowrecord.Record
	lctx    layout.Context
	pending []bool
	jsonMsg *message
}

func newExporter(cfg *Config, set exporter.Settings) (*ipfixExporter, error) {
	tel, err := newTelemetry(set.MeterProvider)
	if err != nil {
		return nil, err
	}
	v4, v6, err := layout.New(cfg.layoutOptions())
	if err != nil {
		return nil, err
	}
	e := &ipfixExporter{
		cfg: cfg, logger: set.Logger, tel: tel, dial: dialCollector,
		network: "tcp", stream: cfg.Transport != TransportUDP, json: cfg.Format == FormatJSON,
		maxMsg: cfg.messageSize(), v4: v4, v6: v6, domains: map[uint32]*domain{},
	}
	if cfg.Transport == TransportUDP {
		e.network = "udp"
	}
	e.jsonMsg = &message{buf: make([]byte, 0, e.maxMsg)}
	return e, nil
}

func (e *ipfixExporter) start(ctx context.Context, _ component.Host) error {
	if e.cfg.Transport != TransportTLS {
		return nil
	}
	tlsCfg, err := e.cfg.TLS.LoadTLSConfig(ctx)
	if err != nil {
		return fmt.Errorf("ipfix exporter: loading TLS settings: %w", err)
	}
	if tlsCfg == nil {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	e.mu.Lock()
	e.tlsCfg = tlsCfg
	e.mu.Unlock()
	return nil
}

func (e *ipfixExporter) shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil {
		e.dropConnection("shutdown")
	}
	if n := countRecords(e.resend); n > 0 {
		e.tel.lost.Add(context.Background(), int64(n), withReason(reasonConnectionLost))
		e.logger.Warn("IPFIX records written to a failed connection were not resent before shutdown", zap.Int("records", n))
		e.resend = nil
	}
	return nil
}

func countRecords(msgs []inflight) int {
	n := 0
	for _, m := range msgs {
		n += m.records
	}
	return n
}

// pushLogs exports ld. Records that cannot be decoded or encoded fail alone and
// are counted; a transport error hands the records not yet written back to the
// sending queue (consumererror.NewLogs) after dropping the connection, so the
// next attempt reconnects and resends the templates.
func (e *ipfixExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := ld.LogRecordCount()
	if n == 0 {
		return nil
	}
	e.tel.received.Add(ctx, int64(n))
	if err := e.ensureConnected(ctx); err != nil {
		e.tel.requeued.Add(ctx, int64(n))
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = e.conn.SetWriteDeadline(dl)
	} else {
		_ = e.conn.SetWriteDeadline(time.Time{})
	}
	if cap(e.pending) < n {
		e.pending = make([]bool, n)
	}
	e.pending = e.pending[:n]
	clear(e.pending)

	now := time.Now()
	pos := 0
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		odid, clusterID := e.clusterOf(rl.Resource())
		e.lctx.ClusterID = clusterID
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				if err := e.add(ctx, pos, lrs.At(k), odid, now); err != nil {
					for p := pos; p < n; p++ {
						e.pending[p] = true
					}
					return e.requeue(ctx, ld, err)
				}
				pos++
			}
		}
	}
	if err := e.flushAll(ctx, now); err != nil {
		return e.requeue(ctx, ld, err)
	}
	e.pruneInflight()
	return nil
}

// add encodes the record at batch position pos into its message, writing the
// message first when the record would not fit. Only transport errors are returned.
func (e *ipfixExporter) add(ctx context.Context, pos int, lr plog.LogRecord, odid uint32, now time.Time) error {
	if err := flowrecord.Decode(lr, &e.rec); err != nil {
		e.tel.fail(ctx, reasonDecode, 1)
		e.logger.Warn("Dropping a log record that is not a valid flow record", zap.Error(err))
		return nil
	}
	t, fam := e.v4, 0
	if e.rec.IsIPv6() {
		t, fam = e.v6, 1
	}
	if err := t.Fill(&e.rec, &e.lctx); err != nil {
		e.tel.fail(ctx, reasonEncode, 1)
		e.logger.Warn("Dropping a flow record that cannot be encoded as IPFIX", zap.Error(err),
			zap.Stringer("source", e.rec.Source.Address), zap.Stringer("destination", e.rec.Destination.Address))
		return nil
	}
	if e.json {
		return e.addJSON(ctx, pos, t, now)
	}
	size := t.RecordLen()
	if headerLen+size > e.maxMsg {
		e.tel.fail(ctx, reasonTooLarge, 1)
		e.logger.Warn("Dropping a flow record larger than the IPFIX message size limit",
			zap.Int("record_bytes", size), zap.Int("max_message_size", e.maxMsg),
			zap.Stringer("source", e.rec.Source.Address), zap.Stringer("destination", e.rec.Destination.Address))
		return nil
	}
	d, err := e.domain(ctx, odid, now)
	if err != nil {
		return err
	}
	m := d.open[fam]
	if m == nil {
		m = newMessage(t.ID, e.maxMsg)
		d.open[fam] = m
	}
	if len(m.buf)+size > e.maxMsg {
		if err := e.writeData(ctx, d, m, now); err != nil {
			return err
		}
	}
	buf, err := t.AppendRecord(m.buf)
	if err != nil {
		e.tel.fail(ctx, reasonEncode, 1)
		e.logger.Warn("Dropping a flow record that cannot be encoded as IPFIX", zap.Error(err))
		return nil
	}
	m.buf = buf
	m.positions = append(m.positions, pos)
	e.pending[pos] = true
	return nil
}

// addJSON appends the record as a JSON line. Over UDP every record is its own
// datagram, as Antrea writes them; over TCP lines are written in chunks.
func (e *ipfixExporter) addJSON(ctx context.Context, pos int, t *layout.Template, now time.Time) error {
	m := e.jsonMsg
	start := len(m.buf)
	m.buf = t.AppendJSON(m.buf, now.UTC())
	lineLen := len(m.buf) - start
	if !e.stream && lineLen > maxMessageSize {
		m.buf = m.buf[:start]
		e.tel.fail(ctx, reasonTooLarge, 1)
		e.logger.Warn("Dropping a JSON flow record larger than a UDP datagram", zap.Int("bytes", lineLen))
		return nil
	}
	m.positions = append(m.positions, pos)
	e.pending[pos] = true
	if !e.stream || len(m.buf) >= e.maxMsg {
		return e.writeJSON(ctx)
	}
	return nil
}

func (e *ipfixExporter) writeJSON(ctx context.Context) error {
	m := e.jsonMsg
	if m.empty() {
		return nil
	}
	if err := e.write(ctx, m.buf, 0, len(m.positions)); err != nil {
		return err
	}
	e.sent(ctx, m)
	m.buf, m.positions = m.buf[:0], m.positions[:0]
	return nil
}

// domain returns the state of observation domain odid on the current
// connection, sending its templates first when they have not been sent yet or,
// over UDP, when they are due for a refresh.
func (e *ipfixExporter) domain(ctx context.Context, odid uint32, now time.Time) (*domain, error) {
	d := e.domains[odid]
	if d == nil {
		d = &domain{id: odid}
		e.domains[odid] = d
	}
	due := d.templatesSent.IsZero() || (!e.stream && now.Sub(d.templatesSent) >= e.cfg.TemplateRefreshInterval)
	if !due {
		return d, nil
	}
	for _, t := range []*layout.Template{e.v4, e.v6} {
		if err := e.write(ctx, templateMessage(t, odid, d.seq, now), odid, 0); err != nil {
			return nil, err
		}
		e.tel.templates.Add(ctx, 1)
	}
	d.templatesSent = now
	return d, nil
}

// writeData writes data message m of domain d and empties it.
func (e *ipfixExporter) writeData(ctx context.Context, d *domain, m *message, now time.Time) error {
	if m.empty() {
		return nil
	}
	if err := e.write(ctx, m.finish(d.id, d.seq, now), d.id, len(m.positions)); err != nil {
		return err
	}
	d.seq += uint32(len(m.positions))
	e.sent(ctx, m)
	m.reset()
	return nil
}

func (e *ipfixExporter) sent(ctx context.Context, m *message) {
	for _, p := range m.positions {
		e.pending[p] = false
	}
	e.tel.sent.Add(ctx, int64(len(m.positions)))
}

func (e *ipfixExporter) flushAll(ctx context.Context, now time.Time) error {
	if e.json {
		return e.writeJSON(ctx)
	}
	for _, d := range e.domains {
		for _, m := range d.open {
			if m != nil {
				if err := e.writeData(ctx, d, m, now); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// write writes one message. Data messages on a stream connection are kept
// until TCP acknowledges them, to be resent if the connection dies first.
func (e *ipfixExporter) write(ctx context.Context, b []byte, odid uint32, records int) error {
	if err := e.conn.write(b); err != nil {
		return fmt.Errorf("writing to IPFIX collector %s: %w", e.cfg.Endpoint, err)
	}
	e.tel.messages.Add(ctx, 1)
	e.tel.bytes.Add(ctx, int64(len(b)))
	if e.stream && records > 0 {
		e.inflight = append(e.inflight, inflight{end: e.conn.written, odid: odid, records: records, data: append([]byte(nil), b...)})
	}
	return nil
}

// pruneInflight forgets the messages TCP has seen acknowledged.
func (e *ipfixExporter) pruneInflight() {
	if len(e.inflight) == 0 {
		return
	}
	unacked, ok := e.conn.unacknowledged()
	if !ok {
		e.inflight = e.inflight[:0]
		return
	}
	acked := e.conn.written - unacked
	i := 0
	for i < len(e.inflight) && e.inflight[i].end <= acked {
		i++
	}
	e.inflight = append(e.inflight[:0], e.inflight[i:]...)
}

// requeue drops the connection after a transport error and returns the records
// not written to the sending queue.
func (e *ipfixExporter) requeue(ctx context.Context, ld plog.Logs, cause error) error {
	e.dropConnection(cause.Error())
	rest := plog.NewLogs()
	pos, kept := 0, 0
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		var nrl plog.ResourceLogs
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			var nsl plog.ScopeLogs
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				if e.pending[pos] {
					if kept == 0 || nrl == (plog.ResourceLogs{}) {
						nrl = rest.ResourceLogs().AppendEmpty()
						rl.Resource().CopyTo(nrl.Resource())
						nrl.SetSchemaUrl(rl.SchemaUrl())
					}
					if nsl == (plog.ScopeLogs{}) {
						nsl = nrl.ScopeLogs().AppendEmpty()
						sl.Scope().CopyTo(nsl.Scope())
						nsl.SetSchemaUrl(sl.SchemaUrl())
					}
					lrs.At(k).CopyTo(nsl.LogRecords().AppendEmpty())
					kept++
				}
				pos++
			}
		}
	}
	e.tel.requeued.Add(ctx, int64(kept))
	return consumererror.NewLogs(cause, rest)
}

// dropConnection closes the connection. The messages TCP had not seen
// acknowledged are kept for resending after the next connect; all open
// messages are discarded (their records are pending and go back to the queue).
func (e *ipfixExporter) dropConnection(reason string) {
	c := e.conn
	if c == nil {
		return
	}
	if len(e.inflight) > 0 {
		unacked, ok := c.unacknowledged()
		if !ok {
			unacked = c.written // unknown: resend everything kept
		}
		acked := c.written - unacked
		for _, m := range e.inflight {
			if m.end > acked {
				e.resend = append(e.resend, m)
			}
		}
		e.inflight = e.inflight[:0]
		if over := len(e.resend) - maxResend; over > 0 {
			n := countRecords(e.resend[:over])
			e.tel.lost.Add(context.Background(), int64(n), withReason(reasonConnectionLost))
			e.logger.Error("Too many unacknowledged IPFIX messages to resend; dropping the oldest", zap.Int("records", n))
			e.resend = append(e.resend[:0], e.resend[over:]...)
		}
	}
	if err := c.close(); err != nil {
		e.logger.Debug("Closing the IPFIX collector connection", zap.Error(err))
	}
	e.conn = nil
	clear(e.domains)
	if e.jsonMsg != nil {
		e.jsonMsg.buf, e.jsonMsg.positions = e.jsonMsg.buf[:0], e.jsonMsg.positions[:0]
	}
	if reason != "shutdown" {
		e.logger.Warn("IPFIX collector connection lost; reconnecting with back-off",
			zap.String("endpoint", e.cfg.Endpoint), zap.String("reason", reason), zap.Int("messages_to_resend", len(e.resend)))
	}
}

// ensureConnected (re)connects when needed, with back-off between failed
// attempts, and resends what the previous connection had not delivered.
func (e *ipfixExporter) ensureConnected(ctx context.Context) error {
	if e.conn != nil && !e.conn.alive() {
		e.dropConnection(fmt.Sprintf("the collector closed the connection: %v", e.conn.peerErr))
	}
	if e.conn != nil {
		return nil
	}
	now := time.Now()
	if now.Before(e.nextDial) {
		return fmt.Errorf("not connected to IPFIX collector %s (%w); next attempt in %s",
			e.cfg.Endpoint, e.dialErr, e.nextDial.Sub(now).Round(time.Millisecond))
	}
	c, err := e.dial(ctx, e.network, e.cfg.Endpoint, e.tlsCfg)
	if err != nil {
		e.tel.connections.Add(ctx, 1, resultFailed)
		e.backoff = min(max(2*e.backoff, backoffInitial), backoffMax)
		e.nextDial = now.Add(e.backoff)
		e.dialErr = err
		e.logger.Warn("Cannot connect to the IPFIX collector", zap.String("endpoint", e.cfg.Endpoint),
			zap.String("transport", e.cfg.Transport), zap.Error(err), zap.Duration("retry_in", e.backoff))
		return fmt.Errorf("connecting to IPFIX collector %s over %s: %w", e.cfg.Endpoint, e.cfg.Transport, err)
	}
	e.tel.connections.Add(ctx, 1, resultOK)
	e.backoff, e.nextDial, e.dialErr = 0, time.Time{}, nil
	e.conn = newConnection(c, e.stream)
	return e.resendUnacknowledged(ctx, now)
}

// resendUnacknowledged writes the messages the previous connection may not
// have delivered, after the templates of their domains, with new sequence numbers.
func (e *ipfixExporter) resendUnacknowledged(ctx context.Context, now time.Time) error {
	for len(e.resend) > 0 {
		m := e.resend[0]
		if e.json {
			if err := e.write(ctx, m.data, 0, m.records); err != nil {
				e.dropConnection(err.Error())
				return err
			}
		} else {
			d, err := e.domain(ctx, m.odid, now)
			if err == nil {
				putMessageHeader(m.data, m.odid, d.seq, now)
				err = e.write(ctx, m.data, m.odid, m.records)
			}
			if err != nil {
				e.dropConnection(err.Error())
				return err
			}
			d.seq += uint32(m.records)
		}
		e.resend = e.resend[1:]
		e.tel.resent.Add(ctx, int64(m.records))
		e.logger.Debug("Resent an unacknowledged IPFIX message", zap.Int("records", m.records))
	}
	e.resend = nil
	return nil
}
