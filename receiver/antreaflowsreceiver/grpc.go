package antreaflowsreceiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/antreawire/flowpb"
	"github.com/flowtel/flowtel/internal/grpcserve"
)

func (r *antreaReceiver) startGRPC() error {
	if r.cfg.GRPC.Endpoint == "" {
		return nil
	}
	ln, err := net.Listen("tcp", r.cfg.GRPC.Endpoint)
	if err != nil {
		return fmt.Errorf("antrea_flows: grpc listener on %s: %w", r.cfg.GRPC.Endpoint, err)
	}
	// Stop (Shutdown) waits for the handlers: each hands on what its stream
	// received before it returns.
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(r.cfg.GRPC.MaxRecvMsgSize), grpc.WaitForHandlers(true)}
	if r.tlsCfg != nil {
		opts = append(opts, grpc.Creds(countingCreds{TransportCredentials: credentials.NewTLS(r.tlsCfg), r: r}))
	}
	r.grpcLn = ln
	r.grpc = grpc.NewServer(opts...)
	pb.RegisterFlowExportServiceServer(r.grpc, &exportService{r: r})
	grpcserve.Serve(&r.wg, r.grpc, ln, r.set.Logger, "antrea_flows: grpc server stopped")
	return nil
}

// exportService is Antrea's FlowExportService: each agent holds one stream
// open and sends its records in it, one flow per request.
type exportService struct {
	pb.UnimplementedFlowExportServiceServer
	r *antreaReceiver
}

// received is what one Recv of a stream returned.
type received struct {
	req *pb.ExportRequest
	err error
}

// Export reads one agent's stream until it ends. The records of consecutive
// requests are handed on together (handOffLimits), as an IPFIX session's
// are: at most records of them, at the latest delay after the first
// arrived, and at once when the stream ends (the agent closed it, an error,
// shutdown), before the handler returns. The RPC is client-streaming: the
// agent's only acknowledgement is the ExportResponse at the end of the
// stream, sent after the last hand-off; an agent does not wait for one per
// request, so gathering does not slow it down.
//
// One goroutine receives the requests (Recv waits without a deadline) and
// passes them, one at a time, to the handler's goroutine, which decodes and
// hands them on: while a hand-off waits for the next consumer, at most one
// request more is received, and gRPC's flow control pushes back on the
// agent. The receiving goroutine ends after passing on the stream's end
// (io.EOF or its error), which the handler always takes before it returns,
// so the stream is not used after its handler returned.
func (s *exportService) Export(stream grpc.ClientStreamingServer[pb.ExportRequest, pb.ExportResponse]) error {
	r := s.r
	// The hand-offs outlive the stream's context: what was received when
	// the stream was cancelled (shutdown) is still handed on.
	ctx := context.WithoutCancel(stream.Context())
	r.tel.ReceiverAntreaFlowsSessions.Add(ctx, 1)
	defer r.tel.ReceiverAntreaFlowsSessions.Add(ctx, -1)
	// The stream's peer is authenticated when its TLS client certificate
	// verified against the client CA (never over plaintext gRPC).
	authenticated := false
	if pr, ok := peer.FromContext(ctx); ok {
		if ti, ok := pr.AuthInfo.(credentials.TLSInfo); ok {
			authenticated = verifiedPeer(&ti.State)
		}
	}
	requests := make(chan received)
	go func() {
		for {
			req, err := stream.Recv()
			requests <- received{req, err}
			if err != nil {
				return
			}
		}
	}()

	b := r.newBatch()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var due <-chan time.Time // the timer's channel while b holds records
	handOn := func() {
		r.handOn(ctx, b, viaGRPC, authenticated)
		if due != nil {
			timer.Stop()
			due = nil
		}
	}
	var records []agentRecord
	for {
		var m received
		select {
		case m = <-requests:
		case <-due:
			handOn()
			continue
		}
		if m.err != nil {
			handOn()
			return r.streamEnded(ctx, stream, m.err)
		}
		records = records[:0]
		for _, f := range m.req.GetFlows() {
			records = append(records, agentRecord{})
			if err := fromFlow(f, &records[len(records)-1]); err != nil {
				records = records[:len(records)-1]
				r.refused(ctx, reasonMalformedRecord, 1, err)
			}
		}
		r.collect(ctx, b, records, viaGRPC)
		switch {
		case b.n >= r.handOff.records:
			handOn()
		case b.n > 0 && due == nil:
			timer.Reset(r.handOff.delay)
			due = timer.C
		}
	}
}

// streamEnded answers the end of a stream, everything received handed on:
// the ExportResponse when the agent closed it, otherwise its error, counted.
func (r *antreaReceiver) streamEnded(ctx context.Context, stream grpc.ClientStreamingServer[pb.ExportRequest, pb.ExportResponse], err error) error {
	if errors.Is(err, io.EOF) {
		return stream.SendAndClose(&pb.ExportResponse{})
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Internal:
			// A request that does not unmarshal: gRPC ends the stream with
			// it; the agent reconnects.
			r.refused(ctx, reasonMalformedMessage, 1, err)
		case codes.ResourceExhausted:
			// A request over max_recv_msg_size: gRPC does not read it and
			// has already ended the stream with its own status
			// (ResourceExhausted, "received message larger than max
			// (<size> vs. <max>)"); what is returned here does not reach
			// the client.
			r.refused(ctx, reasonOversizeRequest, 1, err)
			r.set.Logger.Warn("antrea_flows: gRPC ExportRequest over grpc.max_recv_msg_size refused; the stream ended",
				zap.Int("max_recv_msg_size", r.cfg.GRPC.MaxRecvMsgSize), zap.Error(err))
		}
	}
	return err
}

// fromFlow reads what an agent put in a Flow message into a (zero): its
// catalogue fields through the one pb.Flow mapping (flowpb, the fields
// agents send), then what only the receiver reads: when the agent sent it
// and its observation domain (which Node sent it).
func fromFlow(f *pb.Flow, a *agentRecord) error {
	if err := flowpb.Take(f, &a.Record, true); err != nil {
		return err
	}
	if t := f.GetIpfix().GetExportTime(); t != nil {
		a.Observed = t.AsTime()
	}
	a.domain = f.GetIpfix().GetObservationDomainId()
	return nil
}
