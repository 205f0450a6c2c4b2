package servertlsextension

import (
	"context"
	"net"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/flowtel/flowtel/extension/servertlsextension/internal/metadata"
)

// serverTLS gives the gRPC servers that list it in their middlewares its own
// transport credentials. configgrpc adds a server's own grpc.Creds (from its
// tls block) before the middlewares' options, and gRPC keeps the last
// grpc.Creds, so these replace the server's and every handshake goes through
// them.
type serverTLS struct {
	cfg    *Config
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder
	log    refusalLog
}

var _ extensionmiddleware.GRPCServer = (*serverTLS)(nil)

func newServerTLS(set component.TelemetrySettings, cfg *Config) (*serverTLS, error) {
	tel, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &serverTLS{cfg: cfg, logger: set.Logger, tel: tel, log: refusalLog{interval: cfg.LogInterval}}, nil
}

// Start does nothing: the TLS settings are loaded when a server asks for its
// options (as its Start does), so an extension that no server lists reads no
// file and cannot fail.
func (*serverTLS) Start(context.Context, component.Host) error { return nil }

func (s *serverTLS) Shutdown(context.Context) error {
	s.tel.Shutdown()
	return nil
}

// GetGRPCServerOptions loads the TLS settings, with configtls's reloading of
// the certificate and the client CA file, and returns them as the server's
// transport credentials, counted.
func (s *serverTLS) GetGRPCServerOptions(ctx context.Context) ([]grpc.ServerOption, error) {
	tlsCfg, err := s.cfg.TLS.LoadTLSConfig(ctx)
	if err != nil {
		return nil, err
	}
	return []grpc.ServerOption{grpc.Creds(&countedCreds{TransportCredentials: credentials.NewTLS(tlsCfg), ext: s})}, nil
}

// handshake counts one server handshake and logs it when it was refused.
func (s *serverTLS) handshake(peer net.Addr, err error) {
	if err == nil {
		s.tel.ExtensionServerTLSHandshakes.Add(context.Background(), 1, accepted)
		return
	}
	r := classify(err)
	s.tel.ExtensionServerTLSHandshakes.Add(context.Background(), 1, refusals[r.reason])
	notLogged, ok := s.log.take(time.Now())
	if !ok {
		return
	}
	fields := []zap.Field{zap.Stringer("peer", peer), zap.String("reason", r.reason), zap.Error(err)}
	if r.subject != "" {
		fields = append(fields, zap.String("client_certificate", r.subject))
	}
	if notLogged > 0 {
		fields = append(fields, zap.Int64("refused_not_logged", notLogged))
	}
	s.logger.Warn("TLS handshake refused", fields...)
}

// countedCreds are TLS server credentials that report each handshake's
// outcome.
type countedCreds struct {
	credentials.TransportCredentials
	ext *serverTLS
}

func (c *countedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	c.ext.handshake(raw.RemoteAddr(), err)
	return conn, info, err
}

func (c *countedCreds) Clone() credentials.TransportCredentials {
	return &countedCreds{TransportCredentials: c.TransportCredentials.Clone(), ext: c.ext}
}

// refusalLog lets one log line through per interval and counts the refusals
// it held back in between.
type refusalLog struct {
	interval time.Duration

	mu      sync.Mutex
	last    time.Time
	skipped int64
}

// take reports whether a refusal at now is logged and, if so, how many were
// not logged since the previous line.
func (l *refusalLog) take(now time.Time) (notLogged int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.skipped++
		return 0, false
	}
	l.last, notLogged, l.skipped = now, l.skipped, 0
	return notLogged, true
}
