package clickhouseflowsexporter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
)

// flowsExporter writes flow records into the flows table.
type flowsExporter struct {
	cfg       *Config
	logger    *zap.Logger
	tel       *telemetry
	addr      string
	secure    bool
	table     string // `database`.`table`, for messages
	insertSQL string

	conn driver.Conn

	// ready is set once the server has been reached and the table verified
	// (at Start, or before the first insert when the server was down at Start).
	mu      sync.Mutex
	ready   bool
	version flowtable.Version

	// blocks are the column blocks of finished inserts, one per queue
	// consumer at most, kept for the next inserts: a block keeps the memory
	// of the largest batch it held, so inserts stop allocating it. (A
	// sync.Pool would drop them at every garbage collection, and a
	// block's buffers are what most of a batch's garbage would be.)
	blocks chan *flowtable.Block

	copyWarning sync.Once // the driver's columns could not be shared

	// insertTimes, with a cluster, keeps the timeInserted of failed
	// batches for their retries (nil without a cluster: the server sets it).
	insertTimes *insertTimes
}

func newFlowsExporter(cfg *Config, set component.TelemetrySettings) (*flowsExporter, error) {
	addr, secure, err := cfg.endpoint()
	if err != nil {
		return nil, err
	}
	tel, err := newTelemetry(set)
	if err != nil {
		return nil, err
	}
	e := &flowsExporter{
		cfg: cfg, logger: set.Logger, tel: tel, addr: addr, secure: secure,
		table:     flowtable.QualifiedName(cfg.Database, cfg.Table),
		insertSQL: flowtable.InsertStatement(cfg.Database, cfg.Table),
	}
	if cfg.Cluster != "" {
		e.insertSQL = flowtable.InsertTimeStatement(cfg.Database, cfg.Table)
		keep := 24 * time.Hour // retried without end: remember a day
		if cfg.RetryConfig.Enabled && cfg.RetryConfig.MaxElapsedTime > 0 {
			keep = cfg.RetryConfig.MaxElapsedTime + time.Minute
		}
		e.insertTimes = newInsertTimes(keep)
	}
	consumers := 1
	if cfg.QueueConfig.HasValue() {
		consumers = max(consumers, cfg.QueueConfig.Get().NumConsumers)
	}
	e.blocks = make(chan *flowtable.Block, consumers)
	return e, nil
}

func (e *flowsExporter) start(ctx context.Context, _ component.Host) error {
	opts, err := e.options(ctx)
	if err != nil {
		return err
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return fmt.Errorf("endpoint: cannot open a client for %s (%w); check endpoint, compression and tls", e.cfg.Endpoint, err)
	}
	e.conn = conn
	err = e.prepare(ctx)
	var unreachable *unreachableError
	if errors.As(err, &unreachable) {
		// The server may come up after the collector (a rollout, a restart):
		// do not fail Start; the table is verified before the first insert,
		// and inserts are retried meanwhile.
		e.logger.Warn("ClickHouse is not reachable yet; the table will be verified before the first insert", zap.Error(err))
		return nil
	}
	return err
}

func (e *flowsExporter) shutdown(context.Context) error {
	if e.conn == nil {
		return nil
	}
	return e.conn.Close()
}

func (e *flowsExporter) options(ctx context.Context) (*clickhouse.Options, error) {
	user, password := e.cfg.credentials()
	opts := &clickhouse.Options{
		Protocol:    clickhouse.Native,
		Addr:        []string{e.addr},
		Auth:        clickhouse.Auth{Username: user, Password: password},
		DialTimeout: e.cfg.DialTimeout,
		// How long a silent server is waited for, at each read: for an
		// insert whose rows are sent, answerWait at least (see insert).
		ReadTimeout:  max(e.cfg.TimeoutConfig.Timeout+e.cfg.DialTimeout, answerWait),
		MaxOpenConns: 16,
		MaxIdleConns: 8,
		Compression:  &clickhouse.Compression{Method: compressionMethod(e.cfg.Compression)},
	}
	if e.cfg.Cluster != "" {
		// Through the Distributed table, an insert returns once every
		// shard has its rows, and fails when one cannot take them.
		opts.Settings = clickhouse.Settings{"insert_distributed_sync": 1}
	}
	if e.secure {
		tlsCfg := e.cfg.TLS
		tlsCfg.Insecure = false // tls:// always encrypts
		c, err := tlsCfg.LoadTLSConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("tls: cannot load the certificates (%w); check ca_file, cert_file and key_file", err)
		}
		if c == nil {
			c = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if c.ServerName == "" && !c.InsecureSkipVerify {
			c.ServerName, _, _ = net.SplitHostPort(e.addr)
		}
		opts.TLS = c
	}
	return opts, nil
}

func compressionMethod(name string) clickhouse.CompressionMethod {
	switch name {
	case "zstd":
		return clickhouse.CompressionZSTD
	case "none":
		return clickhouse.CompressionNone
	default:
		return clickhouse.CompressionLZ4
	}
}

// prepare reaches the server, creates the schema when configured to, and
// verifies that the table has every column we write. It runs once.
func (e *flowsExporter) prepare(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ready {
		return nil
	}
	if err := e.conn.Ping(ctx); err != nil {
		return e.connectError(err)
	}
	sv, err := e.conn.ServerVersion()
	if err != nil {
		return e.connectError(err)
	}
	e.version = flowtable.Version{Major: sv.Version.Major, Minor: sv.Version.Minor, Patch: sv.Version.Patch}
	complete := false // the clustered schema is in place already
	switch {
	case e.cfg.CreateSchema && e.cfg.Cluster != "":
		if complete, err = e.clusterSchemaComplete(ctx); err != nil {
			return err
		}
		if !complete {
			if err := e.createClusterSchema(ctx); err != nil {
				return err
			}
		}
	case e.cfg.CreateSchema:
		if err := e.createSchema(ctx); err != nil {
			return err
		}
	}
	if err := e.verifyTable(ctx); err != nil {
		return err
	}
	if e.cfg.CreateSchema && e.cfg.TheiaViews && !complete {
		// After the check, so that a table lacking a column the views read
		// gets the check's error and statement.
		create := e.createViews
		if e.cfg.Cluster != "" {
			create = e.createClusterViews
		}
		if err := create(ctx); err != nil {
			return err
		}
	}
	e.ready = true
	e.logger.Info("Writing flow records to ClickHouse",
		zap.String("endpoint", e.cfg.Endpoint), zap.String("table", e.table), zap.Stringer("server_version", e.version))
	return nil
}

// unreachableError is a failure to reach the server at all (as opposed to the
// server refusing us), which Start tolerates.
type unreachableError struct{ err error }

func (u *unreachableError) Error() string { return u.err.Error() }
func (u *unreachableError) Unwrap() error { return u.err }

// ClickHouse exception codes we explain.
const (
	codeUnknownUser          = 192
	codeWrongPassword        = 193
	codeRequiredPassword     = 194
	codeAuthenticationFailed = 516
)

func (e *flowsExporter) connectError(err error) error {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		switch ex.Code {
		case codeUnknownUser, codeWrongPassword, codeRequiredPassword, codeAuthenticationFailed:
			user, _ := e.cfg.credentials()
			return fmt.Errorf("username: authentication as user %q at %s failed (%w); check username and password, or $%s and $%s",
				user, e.cfg.Endpoint, err, envUsername, envPassword)
		}
		return fmt.Errorf("endpoint: the server at %s refused the connection (%w); check the server's log and the user's settings", e.cfg.Endpoint, err)
	}
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return fmt.Errorf("tls: the server certificate of %s is not trusted (%w); set tls.ca_file to the CA that signed it, or tls.insecure_skip_verify: true",
			e.cfg.Endpoint, err)
	}
	return &unreachableError{fmt.Errorf("endpoint: cannot reach ClickHouse at %s (%w); check that the server runs and listens there", e.cfg.Endpoint, err)}
}

// pushLogs converts one batch of log records into rows and inserts them in one
// statement. Records that are not flow records are skipped and counted; a
// failed insert is returned to exporterhelper, which retries the whole batch.
func (e *flowsExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	n := ld.LogRecordCount()
	e.tel.ExporterClickhouseFlowsRecordsReceived.Add(ctx, int64(n))
	if err := e.prepare(ctx); err != nil {
		e.tel.recordInsertFailed(ctx, n, prepareReason(err))
		return err
	}
	block := e.takeBlock(n)
	defer e.keepBlock(block)
	bad, firstErr := e.fillBlock(block, ld)
	if bad > 0 {
		e.tel.recordFailed(ctx, bad, reasonDecode)
		e.logger.Warn("Skipped log records that are not valid flow records", zap.Int("skipped", bad), zap.Error(firstErr))
	}
	if block.Len() == 0 {
		return nil
	}
	var fingerprint uint64
	var at time.Time
	if e.insertTimes != nil {
		fingerprint = block.Fingerprint()
		at = e.insertTimes.get(fingerprint, time.Now())
	}
	if err := e.insert(ctx, block, at); err != nil {
		e.tel.recordInsertFailed(ctx, block.Len(), insertReason(err))
		if e.insertTimes != nil {
			e.insertTimes.failed(fingerprint, at, time.Now())
		}
		return fmt.Errorf("table: insert of %d rows into %s failed (%w); retried per retry_on_failure", block.Len(), e.table, err)
	}
	if e.insertTimes != nil {
		e.insertTimes.done(fingerprint)
	}
	e.tel.ExporterClickhouseFlowsRowsWritten.Add(ctx, int64(block.Len()))
	e.tel.ExporterClickhouseFlowsInserts.Add(ctx, 1)
	return nil
}

// answerWait is how long an insert whose rows were sent waits for the
// server's answer at least, past the attempt's timeout.
const answerWait = 5 * time.Minute

// insert writes the block as one INSERT of one data block, which the server
// commits whole or not at all. (Sending it as several data blocks with
// batch.Flush would let the driver reuse its column buffers, but is not
// atomic: ClickHouse commits the blocks it has received when the connection
// closes, e.g. on a timeout, and the retry would duplicate them.) The driver
// encodes the block's own column buffers (flowtable.Block.AppendTo), so the
// block is not touched until Send has returned. With a cluster, every row's
// timeInserted is at.
//
// Once the rows are sent, the insert waits for the server's answer beyond
// the attempt's timeout (the connection's read timeout, answerWait at
// least, bounds a silent server): a server that stalls with the rows in
// hand commits them when it goes on, whether or not anyone still waits, so
// giving up at the timeout and sending them again stored them twice (a
// stalled server took three attempts of one batch and kept two). The
// attempt's timeout still ends an insert that has sent no row.
func (e *flowsExporter) insert(ctx context.Context, block *flowtable.Block, at time.Time) error {
	// The batch keeps the context it is prepared with for Send: one that
	// the attempt's deadline cancels only until the rows go out.
	ictx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	untilSent := context.AfterFunc(ctx, cancel)
	batch, err := e.conn.PrepareBatch(ictx, e.insertSQL)
	if err != nil {
		untilSent()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	shared, err := block.AppendTo(batch)
	if err == nil && e.insertTimes != nil {
		times := make([]time.Time, block.Len())
		for i := range times {
			times[i] = at
		}
		err = batch.Column(len(flowtable.Columns)).Append(times)
	}
	if err != nil {
		_ = batch.Abort()
		return err
	}
	if !shared {
		e.copyWarning.Do(func() {
			e.logger.Warn("This clickhouse-go version's columns are not the ones the exporter shares its buffers with; rows are copied into the driver's columns, which costs more CPU per row")
		})
	}
	if !untilSent() { // the attempt's time ran out before a row was sent
		_ = batch.Abort()
		return ctx.Err()
	}
	start := time.Now()
	err = batch.Send()
	if waited := time.Since(start); e.cfg.TimeoutConfig.Timeout > 0 && waited > e.cfg.TimeoutConfig.Timeout {
		e.logger.Warn("ClickHouse answered an insert after more than the exporter's timeout; the insert waited for the answer, since its rows were sent (sending them again would store them twice if the server took them)",
			zap.Int("rows", block.Len()), zap.Duration("waited", waited), zap.Duration("timeout", e.cfg.TimeoutConfig.Timeout), zap.Error(err))
	}
	return err
}

// takeBlock is an empty block, a kept one when there is one, else a new one
// with room for rows rows (so that its columns do not grow value by value
// from a small size, copying themselves as they go).
func (e *flowsExporter) takeBlock(rows int) *flowtable.Block {
	select {
	case b := <-e.blocks:
		return b
	default:
		return flowtable.NewBlock(rows)
	}
}

// keepBlock empties b and keeps it for a later insert, unless as many blocks
// as there are consumers are kept already.
func (e *flowsExporter) keepBlock(b *flowtable.Block) {
	b.Reset()
	select {
	case e.blocks <- b:
	default:
	}
}

func prepareReason(err error) string {
	var unreachable *unreachableError
	if errors.As(err, &unreachable) {
		return insertReason(err)
	}
	return reasonSchema
}

func insertReason(err error) string {
	var ex *clickhouse.Exception
	var ne net.Error
	switch {
	case errors.As(err, &ex):
		return reasonServer
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return reasonTimeout
	default:
		return reasonConnection
	}
}
