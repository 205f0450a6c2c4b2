package flowstreamexporter

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/exporter/flowstreamexporter/internal/metadata"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/grpcserve"
)

// shutdownGrace is how long shutdown waits for streams to end by themselves.
const shutdownGrace = 5 * time.Second

type flowStreamExporter struct {
	cfg     *Config
	set     exporter.Settings
	tel     *metadata.TelemetryBuilder
	ring    *ring
	access  *access
	history *history
	server  *grpc.Server
	addr    net.Addr
	wg      sync.WaitGroup
}

func newExporter(cfg *Config, set exporter.Settings) (*flowStreamExporter, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &flowStreamExporter{cfg: cfg, set: set, tel: tel, ring: newRing(cfg.BufferSize)}, nil
}

func (e *flowStreamExporter) start(ctx context.Context, host component.Host) error {
	client, err := e.cfg.Kubernetes.Client("flowtel/" + metadata.Type.String())
	if err != nil {
		return err
	}
	e.access = newAccess(client, &e.cfg.Kubernetes, e.set.Logger, e.tel)
	e.access.startClientCA()

	// Client certificates are requested, not required (a client may send a
	// token instead), and verified by the authenticator against the
	// cluster's bundle: configtls would require them with client_ca_file.
	tlsCfg, err := e.cfg.TLS.Get().LoadTLSConfig(ctx)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	tlsCfg.ClientAuth = tls.RequestClientCert
	sc := e.cfg.ServerConfig
	sc.TLS = configoptional.None[configtls.ServerConfig]()
	e.server, err = sc.ToServer(ctx, host.GetExtensions(), e.set.TelemetrySettings,
		configgrpc.WithGrpcServerOption(grpc.Creds(credentials.NewTLS(tlsCfg))))
	if err != nil {
		return err
	}
	if e.cfg.History.enabled() {
		if e.history, err = openHistory(ctx, &e.cfg.History, e.tel); err != nil {
			return err
		}
	}
	svc := &service{
		ring: e.ring, access: e.access, history: e.history, limits: e.cfg.Limits, recheck: e.cfg.Kubernetes.RecheckInterval,
		logger: e.set.Logger, tel: e.tel, perUser: map[string]int{},
	}
	pb.RegisterFlowStreamServiceServer(e.server, svc)
	pb.RegisterFlowTopServiceServer(e.server, &topService{stream: svc})
	ln, err := sc.NetAddr.Listen(ctx)
	if err != nil {
		return fmt.Errorf("endpoint: cannot listen on %s: %w", sc.NetAddr.Endpoint, err)
	}
	e.addr = ln.Addr()
	e.set.Logger.Info("flow stream listening", zap.String("endpoint", e.addr.String()))
	grpcserve.Serve(&e.wg, e.server, ln, e.set.Logger, "flow stream server stopped")
	return nil
}

func (e *flowStreamExporter) shutdown(ctx context.Context) error {
	e.ring.close() // ends following streams once they have sent what they read
	if e.server != nil {
		// A client that stops reading would hold GracefulStop forever.
		done := make(chan struct{})
		go func() { e.server.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			e.server.Stop()
			<-done
		case <-time.After(shutdownGrace):
			e.server.Stop()
			<-done
		}
	}
	e.wg.Wait()
	if e.access != nil {
		e.access.shutdown()
	}
	if e.history != nil {
		_ = e.history.close() // the streams using it have ended
	}
	e.tel.Shutdown()
	return nil
}

// pushLogs decodes the flow records and writes them to the ring; records
// that do not decode are refused (counted by the exporter helper as failed).
func (e *flowStreamExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	batch := make([]entry, 0, ld.LogRecordCount())
	var bad int
	var firstErr error
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				r := new(flowrecord.Record)
				if err := attrcodec.Decode(lr, r); err != nil {
					bad++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				batch = append(batch, makeEntry(r))
			}
		}
	}
	e.ring.push(batch)
	e.tel.ExporterFlowStreamRecordsBuffered.Add(ctx, int64(len(batch)))
	if bad > 0 {
		return consumererror.NewPermanent(fmt.Errorf("%d records are not flow records (first: %w)", bad, firstErr))
	}
	return nil
}
