package antreaflowsreceiver

import (
	"errors"
	"fmt"
	"io"
	"net"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/antreawire/flowpb"
)

func (r *antreaReceiver) startGRPC() error {
	if r.cfg.GRPC.Endpoint == "" {
		return nil
	}
	ln, err := net.Listen("tcp", r.cfg.GRPC.Endpoint)
	if err != nil {
		return fmt.Errorf("antrea_flows: grpc listener on %s: %w", r.cfg.GRPC.Endpoint, err)
	}
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(r.cfg.GRPC.MaxRecvMsgSize)}
	if r.tlsCfg != nil {
		opts = append(opts, grpc.Creds(countingCreds{TransportCredentials: credentials.NewTLS(r.tlsCfg), r: r}))
	}
	r.grpcLn = ln
	r.grpc = grpc.NewServer(opts...)
	pb.RegisterFlowExportServiceServer(r.grpc, &exportService{r: r})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.grpc.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			r.set.Logger.Error("antrea_flows: grpc server stopped", zap.Error(err))
		}
	}()
	return nil
}

// exportService is Antrea's FlowExportService: each agent holds one stream
// open and sends its records in it.
type exportService struct {
	pb.UnimplementedFlowExportServiceServer
	r *antreaReceiver
}

func (s *exportService) Export(stream grpc.ClientStreamingServer[pb.ExportRequest, pb.ExportResponse]) error {
	ctx := stream.Context()
	r := s.r
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
	var records []agentRecord
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&pb.ExportResponse{})
		}
		if err != nil {
			if st, ok := status.FromError(err); ok {
				switch st.Code() {
				case codes.Internal:
					// A request that does not unmarshal: gRPC ends the
					// stream with it; the agent reconnects.
					r.refused(ctx, reasonMalformedMessage, 1, err)
				case codes.ResourceExhausted:
					// A request over max_recv_msg_size: gRPC does not read
					// it and has already ended the stream with its own
					// status (ResourceExhausted, "received message larger
					// than max (<size> vs. <max>)"); what is returned here
					// does not reach the client.
					r.refused(ctx, reasonOversizeRequest, 1, err)
					r.set.Logger.Warn("antrea_flows: gRPC ExportRequest over grpc.max_recv_msg_size refused; the stream ended",
						zap.Int("max_recv_msg_size", r.cfg.GRPC.MaxRecvMsgSize), zap.Error(err))
				}
			}
			return err
		}
		records = records[:0]
		for _, f := range req.GetFlows() {
			records = append(records, agentRecord{})
			if err := fromFlow(f, &records[len(records)-1]); err != nil {
				records = records[:len(records)-1]
				r.refused(ctx, reasonMalformedRecord, 1, err)
			}
		}
		r.deliver(ctx, records, viaGRPC, authenticated)
	}
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
