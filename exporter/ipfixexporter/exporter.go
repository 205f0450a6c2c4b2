package ipfixexporter

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/vmware/go-ipfix/pkg/entities"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
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
	v4, v6  *layout.Template // for the template sets only; encoders have their own

	// messages is the free list of message buffers: an encoder fills them, the
	// writer keeps those written on a stream until TCP acknowledges them.
	messages sync.Pool

	encMu    sync.Mutex
	encoders []*encoder // idle encoders

	// mu serialises everything that touches the connection.
	mu       sync.Mutex
	tlsCfg   *tls.Config
	conn     *connection
	domains  map[uint32]*domain
	inflight []inflight // written, not yet acknowledged by TCP
	resend   []inflight // unacknowledged when the last connection died
	backoff  time.Duration
	nextDial time.Time
	dialErr  error
}

func newExporter(cfg *Config, set exporter.Settings) (*ipfixExporter, error) {
	tel, err := newTelemetry(set.TelemetrySettings)
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
	e.messages.New = func() any { return newMessage(e.maxMsg) }
	return e, nil
}

func (e *ipfixExporter) start(ctx context.Context, _ component.Host) error {
	if e.cfg.Transport != TransportTLS {
		return nil
	}
	tlsCfg, err := e.cfg.TLS.LoadTLSConfig(ctx)
	if err != nil {
		return fmt.Errorf("tls: cannot load the certificates (%w); check ca_file, cert_file and key_file", err)
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
		e.tel.ExporterIpfixRecordsLost.Add(context.Background(), int64(n), withReason(reasonConnectionLost))
		e.logger.Warn("IPFIX records written to a failed connection were not resent before shutdown", zap.Int("records", n))
		e.resend = nil
	}
	return nil
}

func countRecords(msgs []inflight) int {
	n := 0
	for _, m := range msgs {
		n += m.msg.records()
	}
	return n
}

func (e *ipfixExporter) getMessage(templateID uint16, odid uint32, json bool) *message {
	m := e.messages.Get().(*message)
	if cap(m.buf) < e.maxMsg { // a compacted copy that was kept for resending
		m.buf = make([]byte, 0, e.maxMsg)
	}
	m.reset(templateID, odid, json)
	return m
}

func (e *ipfixExporter) putMessage(m *message) { e.messages.Put(m) }

func (e *ipfixExporter) getEncoder() (*encoder, error) {
	e.encMu.Lock()
	defer e.encMu.Unlock()
	if n := len(e.encoders); n > 0 {
		enc := e.encoders[n-1]
		e.encoders = e.encoders[:n-1]
		return enc, nil
	}
	return newEncoder(e)
}

func (e *ipfixExporter) putEncoder(enc *encoder) {
	e.encMu.Lock()
	defer e.encMu.Unlock()
	e.encoders = append(e.encoders, enc)
}

// pushLogs exports ld. Decoding and encoding run outside the connection lock,
// so the sending queue's consumers encode in parallel; only the writes are
// serialised. Records that cannot be decoded or encoded fail alone and are
// counted; a transport error hands the records not yet written back to the
// sending queue (consumererror.NewLogs) after dropping the connection, so the
// next attempt reconnects and resends the templates.
func (e *ipfixExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	n := ld.LogRecordCount()
	if n == 0 {
		return nil
	}
	e.tel.ExporterIpfixRecordsReceived.Add(ctx, int64(n))
	enc, err := e.getEncoder()
	if err != nil { // cannot happen: newExporter built the same layout
		e.tel.fail(ctx, reasonEncode, int64(n))
		return consumererror.NewPermanent(err)
	}
	defer e.putEncoder(enc)
	now := time.Now()
	enc.encode(ctx, ld, now)
	msgs := enc.out
	enc.out = enc.out[:0]
	if len(msgs) == 0 {
		return nil
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.ensureConnected(ctx); err != nil {
		return e.requeue(ctx, ld, msgs, err, false)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = e.conn.SetWriteDeadline(dl)
	} else {
		_ = e.conn.SetWriteDeadline(time.Time{})
	}
	for i, m := range msgs {
		records := m.records()
		if err := e.writeData(ctx, m, now); err != nil {
			return e.requeue(ctx, ld, msgs[i:], err, true)
		}
		e.tel.ExporterIpfixRecordsSent.Add(ctx, int64(records))
	}
	e.pruneInflight()
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
		if err := e.conn.write(templateMessage(t, odid, d.seq, now)); err != nil {
			return nil, e.writeError(err)
		}
		e.tel.ExporterIpfixMessagesSent.Add(ctx, 1)
		e.tel.ExporterIpfixBytesSent.Add(ctx, int64(entities.MsgHeaderLength+t.TemplateSetLen()))
		e.tel.ExporterIpfixTemplatesSent.Add(ctx, 1)
	}
	d.templatesSent = now
	return d, nil
}

// writeData writes data message m (after its domain's templates when due),
// numbering it in its domain. On a stream connection m is kept until TCP
// acknowledges it; otherwise it goes back to the free list.
func (e *ipfixExporter) writeData(ctx context.Context, m *message, now time.Time) error {
	if !m.json {
		d, err := e.domain(ctx, m.odid, now)
		if err != nil {
			return err
		}
		m.finish(d.id, d.seq, now)
		d.seq += uint32(m.records())
	}
	if err := e.conn.write(m.buf); err != nil {
		return e.writeError(err)
	}
	e.tel.ExporterIpfixMessagesSent.Add(ctx, 1)
	e.tel.ExporterIpfixBytesSent.Add(ctx, int64(len(m.buf)))
	if e.stream {
		if len(m.buf) < cap(m.buf)/4 {
			// Thousands of small messages can wait for acknowledgement behind a
			// slow collector: keep a compact copy rather than a full-size buffer.
			c := &message{templateID: m.templateID, odid: m.odid, json: m.json,
				buf: slices.Clone(m.buf), positions: slices.Clone(m.positions)}
			e.putMessage(m)
			m = c
		}
		e.inflight = append(e.inflight, inflight{end: e.conn.written, msg: m})
	} else {
		e.putMessage(m)
	}
	return nil
}

func (e *ipfixExporter) writeError(err error) error {
	return fmt.Errorf("endpoint: writing to the IPFIX collector %s failed (%w); the records are retried, check the collector", e.cfg.Endpoint, err)
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
		e.putMessage(e.inflight[i].msg)
		i++
	}
	e.inflight = append(e.inflight[:0], e.inflight[i:]...)
}

// requeue returns the records of the messages not written to the sending
// queue, after dropping the connection when the failure was a write.
func (e *ipfixExporter) requeue(ctx context.Context, ld plog.Logs, unwritten []*message, cause error, drop bool) error {
	if drop {
		e.dropConnection(cause.Error())
	}
	pending := make([]bool, ld.LogRecordCount())
	kept := 0
	for _, m := range unwritten {
		for _, p := range m.positions {
			pending[p] = true
		}
		kept += m.records()
		e.putMessage(m)
	}
	rest := plog.NewLogs()
	pos := 0
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
				if pending[pos] {
					if nrl == (plog.ResourceLogs{}) {
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
				}
				pos++
			}
		}
	}
	e.tel.ExporterIpfixRecordsRequeued.Add(ctx, int64(kept))
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
			e.tel.ExporterIpfixRecordsLost.Add(context.Background(), int64(n), withReason(reasonConnectionLost))
			e.logger.Error("Too many unacknowledged IPFIX messages to resend; dropping the oldest", zap.Int("records", n))
			e.resend = append(e.resend[:0], e.resend[over:]...)
		}
	}
	if err := c.close(); err != nil {
		e.logger.Debug("Closing the IPFIX collector connection", zap.Error(err))
	}
	e.conn = nil
	clear(e.domains)
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
		return fmt.Errorf("endpoint: not connected to the IPFIX collector %s (last attempt: %w); next attempt in %s",
			e.cfg.Endpoint, e.dialErr, e.nextDial.Sub(now).Round(time.Millisecond))
	}
	c, err := e.dial(ctx, e.network, e.cfg.Endpoint, e.tlsCfg)
	if err != nil {
		e.tel.ExporterIpfixConnections.Add(ctx, 1, resultFailed)
		e.backoff = min(max(2*e.backoff, backoffInitial), backoffMax)
		e.nextDial = now.Add(e.backoff)
		e.dialErr = err
		e.logger.Warn("Cannot connect to the IPFIX collector", zap.String("endpoint", e.cfg.Endpoint),
			zap.String("transport", e.cfg.Transport), zap.Error(err), zap.Duration("retry_in", e.backoff))
		return fmt.Errorf("endpoint: cannot connect to the IPFIX collector %s over %s (%w); check that it listens there and that transport and tls match it",
			e.cfg.Endpoint, e.cfg.Transport, err)
	}
	e.tel.ExporterIpfixConnections.Add(ctx, 1, resultOK)
	e.backoff, e.nextDial, e.dialErr = 0, time.Time{}, nil
	e.conn = newConnection(c, e.stream)
	return e.resendUnacknowledged(ctx, now)
}

// resendUnacknowledged writes the messages the previous connection may not
// have delivered, after the templates of their domains, with new sequence numbers.
func (e *ipfixExporter) resendUnacknowledged(ctx context.Context, now time.Time) error {
	for len(e.resend) > 0 {
		m := e.resend[0].msg
		records := m.records()
		if err := e.writeData(ctx, m, now); err != nil {
			e.dropConnection(err.Error())
			return err
		}
		e.resend = e.resend[1:]
		e.tel.ExporterIpfixRecordsResent.Add(ctx, int64(records))
		e.logger.Debug("Resent an unacknowledged IPFIX message", zap.Int("records", records))
	}
	e.resend = nil
	return nil
}
