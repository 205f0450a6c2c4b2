package antreaflowsreceiver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/flowtel/flowtel/internal/flowrecord/recordform"
	"github.com/flowtel/flowtel/internal/senderauth"
	"github.com/flowtel/flowtel/receiver/antreaflowsreceiver/internal/metadata"
)

// antreaReceiver serves the agents' two export protocols and hands each
// record on as a flowtel record half.
type antreaReceiver struct {
	cfg  *Config
	set  receiver.Settings
	next consumer.Logs
	tel  *metadata.TelemetryBuilder

	tlsCfg    *tls.Config
	templates *templateLimits
	tcp       net.Listener
	udp       net.PacketConn
	grpc      *grpc.Server
	grpcLn    net.Listener
	stop      chan struct{}
	wg        sync.WaitGroup
	connsMu   sync.Mutex
	conns     map[net.Conn]struct{}

	// nodes are the cluster's Nodes' own addresses (kubernetes set), nil otherwise.
	nodes     *nodeAddrs
	informers interface{ Shutdown() }
	// handOff bounds the hand-offs of a TCP or TLS session and of a gRPC
	// stream (handOffLimits).
	handOff struct {
		records int
		delay   time.Duration
	}
}

func newReceiver(set receiver.Settings, cfg *Config, next consumer.Logs) (*antreaReceiver, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &antreaReceiver{cfg: cfg, set: set, next: next, tel: tel, stop: make(chan struct{}), conns: map[net.Conn]struct{}{},
		templates: &templateLimits{perSession: cfg.IPFIX.MaxTemplatesPerSession, max: int64(cfg.IPFIX.MaxTemplates)},
		handOff:   handOffLimits}, nil
}

func (r *antreaReceiver) Start(ctx context.Context, _ component.Host) error {
	if r.cfg.TLS.HasValue() {
		c, err := r.cfg.TLS.Get().LoadTLSConfig(ctx)
		if err != nil {
			return fmt.Errorf("antrea_flows: tls: %w", err)
		}
		r.tlsCfg = c
	}
	if err := r.startNodes(ctx); err != nil {
		return err
	}
	if err := r.startIPFIX(); err != nil {
		r.closeListeners()
		return err
	}
	if err := r.startGRPC(); err != nil {
		r.closeListeners()
		return err
	}
	return nil
}

func (r *antreaReceiver) closeListeners() {
	if r.tcp != nil {
		r.tcp.Close()
	}
	if r.udp != nil {
		r.udp.Close()
	}
	if r.grpcLn != nil {
		r.grpcLn.Close()
	}
}

func (r *antreaReceiver) Shutdown(context.Context) error {
	select {
	case <-r.stop:
		return nil
	default:
	}
	close(r.stop)
	if r.grpc != nil {
		r.grpc.Stop()
	}
	r.closeListeners()
	r.connsMu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.connsMu.Unlock()
	r.wg.Wait()
	if r.informers != nil {
		r.informers.Shutdown()
	}
	r.tel.Shutdown()
	return nil
}

func (r *antreaReceiver) newBatch() *batch {
	encode, _ := recordform.Encoder(r.cfg.Encoding) // Validate checked the name
	return newBatch(r.cfg.ClusterUID, metadata.ScopeName, r.set.BuildInfo.Version, r.nodes, encode)
}

// collect turns decoded records into halves in b, counting what it receives
// and refuses; handOn hands them on.
func (r *antreaReceiver) collect(ctx context.Context, b *batch, records []agentRecord, transport transportName) {
	if len(records) == 0 {
		return
	}
	r.tel.ReceiverAntreaFlowsRecordsReceived.Add(ctx, int64(len(records)), transport.attr())
	now := time.Now()
	for i := range records {
		if ref := b.add(&records[i], now); ref != nil {
			r.refused(ctx, ref.reason, 1, ref)
		}
	}
}

// handOn hands what b holds to the next consumer in one call and empties
// it, counting what the next consumer takes and what it refuses (lost).
// authenticated says the peer presented a client certificate the client CA
// verified.
func (r *antreaReceiver) handOn(ctx context.Context, b *batch, transport transportName, authenticated bool) {
	logs, n := b.take()
	if n == 0 {
		return
	}
	// Marked as an agent's only when this receiver, not a bearer token,
	// authenticated the sender (a client certificate the client CA
	// verified): the gateway's node_identity processor lets the mark pass.
	// UDP, plaintext TCP and plaintext gRPC are anyone's.
	if authenticated {
		ctx = senderauth.WithAntreaAgent(ctx, string(transport))
	}
	if err := r.next.ConsumeLogs(ctx, logs); err != nil {
		r.tel.ReceiverAntreaFlowsRecordsDropped.Add(ctx, int64(n), dropConsumerError)
		r.set.Logger.Warn("antrea_flows: the next consumer refused records; they are lost", zap.Int("records", n), zap.Error(err))
		return
	}
	r.tel.ReceiverAntreaFlowsRecordsEmitted.Add(ctx, int64(n))
}

// verifiedPeer says whether a TLS connection's client presented a
// certificate that verified against the client CA.
func verifiedPeer(st *tls.ConnectionState) bool {
	return st != nil && len(st.VerifiedChains) > 0
}

func (r *antreaReceiver) refused(ctx context.Context, reason string, n int, err error) {
	r.tel.ReceiverAntreaFlowsRefused.Add(ctx, int64(n), refusalAttr(reason))
	r.set.Logger.Debug("antrea_flows: input refused", zap.String("reason", reason), zap.Error(err))
}

func (r *antreaReceiver) track(c net.Conn) bool {
	r.connsMu.Lock()
	defer r.connsMu.Unlock()
	select {
	case <-r.stop:
		return false
	default:
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *antreaReceiver) untrack(c net.Conn) {
	r.connsMu.Lock()
	delete(r.conns, c)
	r.connsMu.Unlock()
}
