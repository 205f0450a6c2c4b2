package antreaflowsreceiver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
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
		now := time.Now()
		records = records[:0]
		for _, f := range req.GetFlows() {
			var a agentRecord
			if err := fromFlow(f, now, &a); err != nil {
				r.refused(ctx, reasonMalformedRecord, 1, err)
				continue
			}
			records = append(records, a)
		}
		r.deliver(ctx, records, viaGRPC, authenticated)
	}
}

// fromFlow reads what an agent put in a Flow message.
func fromFlow(f *pb.Flow, now time.Time, a *agentRecord) error {
	if f == nil {
		return errors.New("empty flow")
	}
	var err error
	ip := f.GetIp()
	if a.src.addr, err = addrOf(ip.GetSource(), "ip.source"); err != nil {
		return err
	}
	if a.dst.addr, err = addrOf(ip.GetDestination(), "ip.destination"); err != nil {
		return err
	}
	if f.GetStartTs() != nil {
		a.start = f.GetStartTs().AsTime()
	}
	if f.GetEndTs() != nil {
		a.end = f.GetEndTs().AsTime()
	}
	if t := f.GetIpfix().GetExportTime(); t != nil {
		a.exportTime = t.AsTime()
	}
	a.observationDomain = f.GetIpfix().GetObservationDomainId()
	if f.GetEndReason() < 0 || f.GetEndReason() > 255 {
		return fmt.Errorf("end_reason %d out of range", f.GetEndReason())
	}
	a.endReason = uint8(f.GetEndReason())
	tr := f.GetTransport()
	if tr.GetProtocolNumber() > 255 || tr.GetSourcePort() > 65535 || tr.GetDestinationPort() > 65535 {
		return errors.New("transport: protocol number over 255 or port over 65535")
	}
	a.protocol, a.src.port, a.dst.port = uint8(tr.GetProtocolNumber()), uint16(tr.GetSourcePort()), uint16(tr.GetDestinationPort())
	a.tcpState = tr.GetTcp().GetStateName()
	a.stats, a.reverse = statsOf(f.GetStats()), statsOf(f.GetReverseStats())
	if f.GetProxySnatPort() > 65535 {
		return errors.New("proxy_snat_port over 65535")
	}
	if a.proxySNATAddr, err = addrOf(f.GetProxySnatIp(), "proxy_snat_ip"); err != nil {
		return err
	}
	a.proxySNATPort = uint16(f.GetProxySnatPort())

	k := f.GetK8S()
	if k.GetFlowType() < 0 || k.GetFlowType() > 255 {
		return fmt.Errorf("k8s.flow_type %d out of range", k.GetFlowType())
	}
	a.flowType = uint8(k.GetFlowType())
	a.src.namespace, a.src.pod, a.src.podUID = k.GetSourcePodNamespace(), k.GetSourcePodName(), k.GetSourcePodUid()
	a.src.node, a.src.nodeUID = k.GetSourceNodeName(), k.GetSourceNodeUid()
	a.dst.namespace, a.dst.pod, a.dst.podUID = k.GetDestinationPodNamespace(), k.GetDestinationPodName(), k.GetDestinationPodUid()
	a.dst.node, a.dst.nodeUID = k.GetDestinationNodeName(), k.GetDestinationNodeUid()
	if k.GetDestinationServicePort() > 65535 {
		return errors.New("k8s.destination_service_port over 65535")
	}
	a.servicePort, a.servicePortName, a.serviceUID = uint16(k.GetDestinationServicePort()), k.GetDestinationServicePortName(), k.GetDestinationServiceUid()
	svc := k.GetDestinationServiceIp()
	if len(svc) == 0 {
		svc = k.GetDestinationClusterIp()
	}
	if a.serviceAddr, err = addrOf(svc, "k8s.destination_service_ip"); err != nil {
		return err
	}
	a.ingress = agentPolicy{typ: uint8(k.GetIngressNetworkPolicyType()), namespace: k.GetIngressNetworkPolicyNamespace(),
		name: k.GetIngressNetworkPolicyName(), uid: k.GetIngressNetworkPolicyUid(), rule: k.GetIngressNetworkPolicyRuleName(),
		ruleAction: uint8(k.GetIngressNetworkPolicyRuleAction())}
	a.egress = agentPolicy{typ: uint8(k.GetEgressNetworkPolicyType()), namespace: k.GetEgressNetworkPolicyNamespace(),
		name: k.GetEgressNetworkPolicyName(), uid: k.GetEgressNetworkPolicyUid(), rule: k.GetEgressNetworkPolicyRuleName(),
		ruleAction: uint8(k.GetEgressNetworkPolicyRuleAction())}
	for _, v := range []int32{int32(k.GetIngressNetworkPolicyType()), int32(k.GetEgressNetworkPolicyType()),
		int32(k.GetIngressNetworkPolicyRuleAction()), int32(k.GetEgressNetworkPolicyRuleAction())} {
		if v < 0 || v > 255 {
			return fmt.Errorf("k8s: network policy type or rule action %d out of range", v)
		}
	}
	a.egressName, a.egressUID, a.egressNode, a.egressNodeUID = k.GetEgressName(), k.GetEgressUid(), k.GetEgressNodeName(), k.GetEgressNodeUid()
	if a.egressAddr, err = addrOf(k.GetEgressIp(), "k8s.egress_ip"); err != nil {
		return err
	}
	return nil
}

// addrOf reads an address of 4 or 16 bytes; empty or unspecified is not set.
func addrOf(b []byte, field string) (netip.Addr, error) {
	if len(b) == 0 {
		return netip.Addr{}, nil
	}
	a, ok := netip.AddrFromSlice(b)
	if !ok {
		return netip.Addr{}, fmt.Errorf("%s: %d bytes, not an IPv4 or IPv6 address", field, len(b))
	}
	return validAddr(a), nil
}

func statsOf(s *pb.Stats) agentCounters {
	return agentCounters{packetTotal: s.GetPacketTotalCount(), octetTotal: s.GetOctetTotalCount(),
		packetDelta: s.GetPacketDeltaCount(), octetDelta: s.GetOctetDeltaCount()}
}
