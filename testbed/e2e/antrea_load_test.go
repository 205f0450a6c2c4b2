//go:build integration

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/distributions"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/antreaagent"
	"github.com/flowtel/flowtel/testbed/collector"
)

// BenchmarkGatewayAntreaAgents is the gateway load run on Antrea agents'
// IPFIX (issue 44): two unmodified agents' exports, one agent (observation
// domain) per Node, to the shipped flowtel-gateway with the shipped
// antrea_flows receiver (IPFIX over TLS, the agents' client certificates
// required), flow_correlation and the shipped ipfix exporter to a counting
// IPFIX collector in the test. The load is 150,000 inter-Node connections,
// each reported by both Nodes, and 30,000 intra-Node ones (15,000 per Node):
// 330,000 records in, 180,000 connections out (150,000 paired, 30,000 intra-Node).
//
// The agents' side is encoded before the clock starts: go-ipfix's exporting
// process, as the agent uses it (the agent's IPv4 and IPv6 templates on
// connecting, one record per message), writes into memory
// (antreaagent.Capture); during the run those bytes are written as they are
// on each agent's TLS connection, at full burst, so the sender spends only
// TLS on the measured path. Reported: the gateway's CPU per record in (from
// its process's CPU time), its peak RSS, the time from the first byte sent to
// the last record out, records out, and every loss counter of the gateway.
// The run fails when any record is lost: a gateway must not lose a burst by
// default. Run: make load.
//
// For a before/after comparison FLOWTEL_BENCH_GATEWAY names another gateway
// binary to run; FLOWTEL_BENCH_PERF names a file where perf records the
// gateway's CPU profile over the measured window (profileProcess).
func BenchmarkGatewayAntreaAgents(b *testing.B) {
	for range b.N {
		benchmarkGatewayAntreaAgents(b, ipfixAgents)
	}
}

// BenchmarkGatewayAntreaAgentsGRPC is the same run with the agents exporting
// over gRPC, Antrea's FlowExportService (the default of Antrea's Helm chart),
// with TLS and the agents' client certificates: each agent's one
// client-streaming Export stream, one flow per request as the agent sends
// them. The requests are encoded before the clock starts
// (grpc.PreparedMsg: marshalled and framed), and the run sends them on the
// open streams as fast as gRPC's flow control lets it, leaving the streams
// open as the agents do. The load, the gateway and what is reported are the
// IPFIX run's.
func BenchmarkGatewayAntreaAgentsGRPC(b *testing.B) {
	for range b.N {
		benchmarkGatewayAntreaAgents(b, grpcAgents)
	}
}

const (
	agentInterConns = 150_000
	agentIntraConns = 30_000 // half on each Node
	agentRecordsIn  = 2*agentInterConns + agentIntraConns
	agentConnsOut   = agentInterConns + agentIntraConns
)

// The two Nodes of the run, their agents' Pod networks.
var agentNodes = [2]struct {
	name string
	pods byte // 10.<pods>.0.0/16
}{{"antrea-node-a", 10}, {"antrea-node-b", 11}}

// agentExport connects each Node's agent to the gateway's antrea_flows
// receiver (handshakes done), its whole export prepared, and returns for
// each what sends that export.
type agentExport func(b *testing.B, certs string, ipfixAddr, grpcAddr string) []func() error

func benchmarkGatewayAntreaAgents(b *testing.B, export agentExport) {
	b.StopTimer()
	gatewayBin := benchGatewayBinary(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	sink := startIPFIXCounter(b)
	dir := b.TempDir()
	certs := bedCerts(b, dir)
	agentPort, grpcPort := freePort(b), freePort(b)
	gw, _ := startCollector(b, ctx, antreaLoadGateway(b, gatewayBin, dir, certs, agentPort, grpcPort, sink.addr()))

	// Both agents connected (TLS handshakes done) before the clock starts.
	sends := export(b, certs, fmt.Sprintf("127.0.0.1:%d", agentPort), fmt.Sprintf("127.0.0.1:%d", grpcPort))

	peak := watchRSS([]*collector.Process{gw})
	cpuBefore := cpuTimes(b, []*collector.Process{gw})
	selfBefore := selfCPU()
	stopProfile := profileProcess(b, gw)
	b.StartTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(sends))
	for i, send := range sends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = send()
		}()
	}
	wg.Wait()
	sent := time.Since(start)
	for _, err := range errs {
		require.NoError(b, err, "an agent's writes")
	}
	// Until every record is out, or none came for 10 s (a loss: the counters
	// below say where).
	for seen, quiet := int64(-1), time.Now(); sink.records.Load() < agentConnsOut && time.Since(start) < 5*time.Minute; {
		if n := sink.records.Load(); n != seen {
			seen, quiet = n, time.Now()
		} else if time.Since(quiet) > 10*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	cpuAfter := cpuTimes(b, []*collector.Process{gw})
	stopProfile()
	self := selfCPU() - selfBefore
	rss := peak.stop()[0]
	last := sink.lastRecord()
	if last.IsZero() {
		last = time.Now()
	}
	elapsed := last.Sub(start)
	time.Sleep(time.Second) // anything more than expected would come now
	gwCPU := cpuAfter[0] - cpuBefore[0]

	metric := func(name string) float64 {
		m, err := gw.Metrics(name)
		require.NoError(b, err)
		var total float64
		for k, v := range m {
			if k == name || strings.HasPrefix(k, name+"{") {
				total += v
			}
		}
		return total
	}
	b.Logf("records: in %.0f (antrea_flows received), %.0f emitted, %.0f refused; flow_correlation received %.0f, pairs %.0f, unpaired %.0f; ipfix sent %.0f; at the sink %d (%d inter-Node, %d not paired, %d intra-Node, %d other)",
		metric("otelcol_receiver_antrea_flows_records_received"), metric("otelcol_receiver_antrea_flows_records_emitted"),
		metric("otelcol_receiver_antrea_flows_refused"), metric("otelcol_processor_flow_correlation_records_received"),
		metric("otelcol_processor_flow_correlation_pairs"), metric("otelcol_processor_flow_correlation_records_unpaired"),
		metric("otelcol_exporter_ipfix_records_sent"), sink.records.Load(), sink.inter.Load(), sink.notPaired.Load(),
		sink.intra.Load(), sink.otherType.Load())
	lost := antreaLoadLosses(b, gw)
	b.Logf("loss counters (non-zero): %v", lost)
	b.Logf("first send to last record out %v (agents' writes %v); gateway CPU %v, peak RSS %.0f MB",
		elapsed.Round(time.Millisecond), sent.Round(time.Millisecond), gwCPU.Round(time.Millisecond), float64(rss)/(1<<20))

	b.ReportMetric(float64(gwCPU.Microseconds())/agentRecordsIn, "gateway-cpu-µs/record-in")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MB-peak")
	b.ReportMetric(elapsed.Seconds(), "s-first-send-to-last-out")
	b.ReportMetric(agentRecordsIn/elapsed.Seconds(), "records-in/s")
	b.ReportMetric(float64(sink.records.Load()), "records-out")
	if m := sink.dataMessages.Load(); m > 0 {
		b.ReportMetric(float64(sink.records.Load())/float64(m), "records/ipfix-message-out")
	}
	b.ReportMetric(100*gwCPU.Seconds()/elapsed.Seconds(), "gateway-cpu-%/core")
	b.ReportMetric(100*self.Seconds()/elapsed.Seconds(), "agents+sink-cpu-%/core")

	// Nothing lost with the shipped configuration, by the sink and by the
	// gateway's own counters.
	assert.Empty(b, sink.errors(), "the sink could not read what the gateway sent")
	assert.Equal(b, int64(agentConnsOut), sink.records.Load(), "records out")
	assert.Equal(b, int64(agentInterConns), sink.inter.Load(), "inter-Node records out")
	assert.Equal(b, int64(agentIntraConns), sink.intra.Load(), "intra-Node records out")
	assert.Zero(b, sink.notPaired.Load(), "inter-Node records out not paired")
	assert.Zero(b, sink.otherType.Load(), "records out of another flow type")
	assert.Equal(b, float64(agentRecordsIn), metric("otelcol_receiver_antrea_flows_records_emitted"), "records antrea_flows handed on")
	assert.Equal(b, float64(agentInterConns), metric("otelcol_processor_flow_correlation_pairs"), "pairs")
	assert.Empty(b, lost, "the gateway counted records as not delivered")
}

// antreaLoadLosses is every non-zero counter of the gateway that counts
// records (or input) it refused, dropped, failed or lost: the testbed's loss
// counters, and antrea_flows' refusals (input it did not decode or refused).
func antreaLoadLosses(b *testing.B, gw *collector.Process) map[string]float64 {
	lost, err := lossCounters(gw)
	require.NoError(b, err)
	for _, name := range []string{"otelcol_receiver_antrea_flows_refused", "otelcol_receiver_antrea_flows_clients_refused",
		"otelcol_processor_flow_correlation_records_unpaired"} {
		m, err := gw.Metrics(name)
		require.NoError(b, err)
		for k, v := range m {
			if v != 0 && (k == name || strings.HasPrefix(k, name+"{")) {
				lost[k] = v
			}
		}
	}
	return lost
}

// antreaLoadGateway is the shipped gateway with the shipped antrea_flows
// settings (deploy/kubernetes/components/antrea-flow-aggregator) and the
// shipped Go runtime settings, overlaid for the run: loopback ports, the
// bed's certificates (the agents present the node certificate), no
// Kubernetes index or Node watch (no cluster), no node_identity (it reviews
// node collectors' tokens with the API server; agents' records that TLS
// authenticated pass it unchecked), and the ipfix exporter, with its
// defaults, to the counting sink.
func antreaLoadGateway(b testing.TB, binary, dir, certs string, agentPort, grpcPort int, sink string) collector.Options {
	env := append(shippedGatewayRuntimeEnv(b), "POD_NAMESPACE=flowtel",
		"FLOWTEL_TLS_CERT_FILE="+filepath.Join(certs, "gateway.crt"), "FLOWTEL_TLS_KEY_FILE="+filepath.Join(certs, "gateway.key"),
		"FLOWTEL_TLS_CLIENT_CA_FILE="+filepath.Join(certs, "node-ca.crt"))
	return collector.Options{Name: "gateway-antrea-load", Binary: binary, Dir: dir, Env: env,
		Configs: []string{distributions.Config(distributions.Gateway), shippedAntreaConfig},
		Config:  antreaLoadOverlay(freePort(b), agentPort, grpcPort, sink)}
}

// shippedAntreaConfig is the antrea_flows receiver as the kustomize component
// (and the Helm chart, antreaAgents.enabled) adds it to the gateway.
var shippedAntreaConfig = filepath.Join(repoRoot, "deploy", "kubernetes", "components", "antrea-flow-aggregator", "gateway-antrea.yaml")

func antreaLoadOverlay(otlpPort, agentPort, grpcPort int, sink string) string {
	return fmt.Sprintf(`
extensions:
  health_check: {endpoint: "127.0.0.1:HEALTH_PORT"}
receivers:
  otlp: {protocols: {grpc: {endpoint: "127.0.0.1:%d"}}}
  antrea_flows:
    ipfix: {endpoint: "127.0.0.1:%d"}
    grpc: {endpoint: "127.0.0.1:%d"}
    tls: {cert_file: "${env:FLOWTEL_TLS_CERT_FILE}", key_file: "${env:FLOWTEL_TLS_KEY_FILE}", client_ca_file: "${env:FLOWTEL_TLS_CLIENT_CA_FILE}"}
    kubernetes: {enabled: false}
processors:
  flow_correlation: {kubernetes: {enabled: false}}
exporters:
  ipfix: {endpoint: %q, cluster_uuid: 0b0c0d0e-0000-4000-8000-000000000001}
service:
  pipelines:
    logs: {receivers: [otlp, antrea_flows], processors: [memory_limiter, flow_correlation], exporters: [ipfix, signal_to_metrics]}
`+telemetry, otlpPort, agentPort, grpcPort, sink)
}

// agentTLS is an agent's TLS client as the bed's agents have it: the
// gateway's certificate verified, the node client certificate presented.
func agentTLS(b *testing.B, certs string) *tls.Config {
	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.crt"))
	require.NoError(b, err)
	pool := x509.NewCertPool()
	require.True(b, pool.AppendCertsFromPEM(caPEM))
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "node.crt"), filepath.Join(certs, "node.key"))
	require.NoError(b, err)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert},
		ServerName: "flowtel-gateway.flowtel.svc", MinVersion: tls.VersionTLS12}
}

// ipfixAgents: each agent's IPFIX TLS connection, and its whole export
// (agentStreams) written on it at once.
func ipfixAgents(b *testing.B, certs, ipfixAddr, _ string) []func() error {
	streams := agentStreams(b, time.Now())
	sends := make([]func() error, len(streams))
	for i := range streams {
		c, err := tls.Dial("tcp", ipfixAddr, agentTLS(b, certs))
		require.NoError(b, err)
		require.NoError(b, c.Handshake())
		b.Cleanup(func() { c.Close() })
		sends[i] = func() error {
			_, err := c.Write(streams[i])
			return err
		}
	}
	return sends
}

// grpcAgents: each agent's FlowExportService stream over TLS, and its
// export as one request per flow, encoded for the stream in advance, sent
// one after the other.
func grpcAgents(b *testing.B, certs, _, grpcAddr string) []func() error {
	now := time.Now()
	sends := make([]func() error, len(agentNodes))
	for n := range agentNodes {
		cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(agentTLS(b, certs))))
		require.NoError(b, err)
		b.Cleanup(func() { cc.Close() })
		stream, err := pb.NewFlowExportServiceClient(cc).Export(context.Background())
		require.NoError(b, err)
		msgs := make([]*grpc.PreparedMsg, 0, agentInterConns+agentIntraConns/2)
		require.NoError(b, agentLoadOrder(n, func(c loadConn) error {
			m := new(grpc.PreparedMsg)
			msgs = append(msgs, m)
			return m.Encode(stream, &pb.ExportRequest{Flows: []*pb.Flow{agentLoadFlow(c, n, now)}})
		}))
		sends[n] = func() error {
			for _, m := range msgs {
				if err := stream.SendMsg(m); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return sends
}

// agentLoadOrder calls send with Node n's connections in the order both
// Nodes export: connection i's half on each Node, and after every tenth
// connection one of the Node's own intra-Node connections.
func agentLoadOrder(n int, send func(loadConn) error) error {
	for i := range agentInterConns {
		if err := send(interConn(i)); err != nil {
			return err
		}
		if i%10 == 9 {
			if err := send(intraConn(i/10, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// agentStreams is what each Node's agent sends, encoded by go-ipfix's
// exporting process: its templates, then one message per record, in the
// agents' order (agentLoadOrder).
func agentStreams(b *testing.B, now time.Time) [][]byte {
	out := make([][]byte, len(agentNodes))
	for n, node := range agentNodes {
		stream, err := antreaagent.Capture(node.name, func(a *antreaagent.Agent) error {
			return agentLoadOrder(n, func(c loadConn) error { return a.Send(false, agentLoadRecord(c, n, now)) })
		})
		require.NoError(b, err, node.name)
		out[n] = stream
	}
	return out
}

// agentLoadFlow is c as Node n's agent sends it over gRPC: the record
// agentLoadRecord sends over IPFIX, in Antrea's Flow message as the agent's
// gRPC exporter fills it (its export time and observation domain; Node names
// for its own Pods only).
func agentLoadFlow(c loadConn, n int, now time.Time) *pb.Flow {
	node := agentNodes[n].name
	f := &pb.Flow{
		Ipfix:     &pb.IPFIX{ExportTime: timestamppb.New(now), ObservationDomainId: antreaagent.ObservationDomain(node)},
		StartTs:   timestamppb.New(now.Add(-10 * time.Second)),
		EndTs:     timestamppb.New(now),
		EndReason: pb.FlowEndReason(flowrecord.EndReasonEndOfFlow),
		Ip:        &pb.IP{Version: pb.IPVersion_IP_VERSION_4, Source: c.src.Addr().AsSlice(), Destination: c.dst.Addr().AsSlice()},
		Transport: &pb.Transport{ProtocolNumber: 6, SourcePort: uint32(c.src.Port()), DestinationPort: uint32(c.dst.Port()),
			Protocol: &pb.Transport_Tcp{Tcp: &pb.TCP{StateName: "TIME_WAIT"}}},
		K8S:          &pb.Kubernetes{FlowType: pb.FlowType(c.flowType)},
		Stats:        &pb.Stats{PacketTotalCount: 40, OctetTotalCount: 30000, PacketDeltaCount: 40, OctetDeltaCount: 30000},
		ReverseStats: &pb.Stats{PacketTotalCount: 30, OctetTotalCount: 20000, PacketDeltaCount: 30, OctetDeltaCount: 20000},
	}
	if c.srcNode == n {
		f.K8S.SourcePodName, f.K8S.SourcePodNamespace, f.K8S.SourceNodeName = c.srcPod, "shop", node
		if c.service.IsValid() {
			f.K8S.DestinationServicePort, f.K8S.DestinationServicePortName = uint32(c.service.Port()), c.servicePortName
			f.K8S.DestinationClusterIp = c.service.Addr().AsSlice()
			f.K8S.DestinationServiceIp = c.service.Addr().AsSlice()
		}
	}
	if c.dstNode == n {
		f.K8S.DestinationPodName, f.K8S.DestinationPodNamespace, f.K8S.DestinationNodeName = c.dstPod, "shop", node
	}
	return f
}

// loadConn is a connection of the run: its endpoints, the Node of each, and
// the Service it was addressed to (DNATed on the source's Node), if any.
type loadConn struct {
	src, dst         netip.AddrPort
	srcPod, dstPod   string
	srcNode, dstNode int
	flowType         flowrecord.FlowType
	service          netip.AddrPort
	servicePortName  string
}

// interConn i: a client Pod on Node a calls a Service whose endpoint is a
// server Pod on Node b.
func interConn(i int) loadConn {
	return loadConn{
		src:    netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, agentNodes[0].pods, byte(i >> 8), byte(i)}), uint16(20000+i>>16)),
		dst:    netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, agentNodes[1].pods, 200, byte(1 + i%200)}), 8080),
		srcPod: fmt.Sprintf("client-%d", i%500), dstPod: fmt.Sprintf("server-%d", i%200),
		srcNode: 0, dstNode: 1, flowType: flowrecord.FlowTypeInterNode,
		service: netip.MustParseAddrPort("10.96.0.10:80"), servicePortName: "shop/server:http",
	}
}

// intraConn j of Node n: a Pod calls a database Pod on its own Node.
func intraConn(j, n int) loadConn {
	pods := agentNodes[n].pods
	return loadConn{
		src:    netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, pods, byte(j >> 8), byte(j)}), 40000),
		dst:    netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, pods, 201, byte(1 + j%50)}), 5432),
		srcPod: fmt.Sprintf("client-%d", j%500), dstPod: fmt.Sprintf("db-%d", j%50),
		srcNode: n, dstNode: n, flowType: flowrecord.FlowTypeIntraNode,
	}
}

// agentLoadRecord is c as Node n's agent exports it at its end: the Pod and
// Node names of its own endpoints only, the Service on the Node that
// translated it, both directions' counters.
func agentLoadRecord(c loadConn, n int, now time.Time) func(string) any {
	srcLocal, dstLocal := c.srcNode == n, c.dstNode == n
	local := func(is bool, v string) any {
		if is {
			return v
		}
		return nil
	}
	return func(name string) any {
		switch name {
		case "flowStartSeconds":
			return uint32(now.Add(-10 * time.Second).Unix())
		case "flowEndSeconds":
			return uint32(now.Unix())
		case "flowEndReason":
			return uint8(flowrecord.EndReasonEndOfFlow)
		case "sourceTransportPort":
			return c.src.Port()
		case "destinationTransportPort":
			return c.dst.Port()
		case "protocolIdentifier":
			return uint8(6)
		case "packetTotalCount", "packetDeltaCount":
			return uint64(40)
		case "octetTotalCount", "octetDeltaCount":
			return uint64(30000)
		case "reversePacketTotalCount", "reversePacketDeltaCount":
			return uint64(30)
		case "reverseOctetTotalCount", "reverseOctetDeltaCount":
			return uint64(20000)
		case "sourceIPv4Address":
			return net.IP(c.src.Addr().AsSlice())
		case "destinationIPv4Address":
			return net.IP(c.dst.Addr().AsSlice())
		case "sourcePodName":
			return local(srcLocal, c.srcPod)
		case "sourcePodNamespace", "destinationPodNamespace":
			return local(name == "sourcePodNamespace" && srcLocal || name == "destinationPodNamespace" && dstLocal, "shop")
		case "sourceNodeName":
			return local(srcLocal, agentNodes[n].name)
		case "destinationPodName":
			return local(dstLocal, c.dstPod)
		case "destinationNodeName":
			return local(dstLocal, agentNodes[n].name)
		case "tcpState":
			return "TIME_WAIT"
		case "flowType":
			return uint8(c.flowType)
		}
		if !c.service.IsValid() || !srcLocal {
			return nil
		}
		switch name {
		case "destinationServicePort":
			return c.service.Port()
		case "destinationServicePortName":
			return c.servicePortName
		case "destinationClusterIPv4", "destinationServiceIPv4":
			return net.IP(c.service.Addr().AsSlice())
		}
		return nil
	}
}
