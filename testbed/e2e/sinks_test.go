//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

// sinkRecord is the part of one exported flow record that every sink carries:
// the fields compared between ClickHouse, IPFIX and OTLP. Antrea's aggregate
// IPFIX layout has no endpoint kinds and no correlation state, so those are
// compared only where the sink has them (kindsKnown).
type sinkRecord struct {
	Protocol                          uint8
	SourcePort                        uint16
	FlowType                          uint8
	SourcePod, SourceNode             string
	DestinationPod, DestinationNode   string
	ServicePortName                   string
	SourceKind, DestinationKind       string
	CorrelationState                  string
	kindsKnown                        bool
	End                               uint32 // flowEndSeconds
	OctetTotal, ReverseOctetTotal     uint64
	PacketTotal, ReversePacketTotal   uint64
	SourceIP, DestinationIP, Exporter string
	IngressPolicy, EgressPolicy       string // namespace/name/rule/action, as Row
	ies                               int    // IPFIX: information elements in the record
}

// later orders two records of one connection: the final one has the latest end
// and, within a second, the largest counters (they only grow).
func (r sinkRecord) later(o sinkRecord) bool {
	if r.End != o.End {
		return r.End > o.End
	}
	if r.OctetTotal != o.OctetTotal {
		return r.OctetTotal > o.OctetTotal
	}
	return r.ReverseOctetTotal > o.ReverseOctetTotal
}

// final returns the last record of the case c (by source port and protocol).
func final(recs []sinkRecord, c Case) (sinkRecord, int, bool) {
	var last sinkRecord
	n := 0
	for _, r := range recs {
		if r.SourcePort != c.Sport || r.Protocol != c.protocol() {
			continue
		}
		if n == 0 || r.later(last) {
			last = r
		}
		n++
	}
	return last, n, n > 0
}

func (c Case) protocol() uint8 {
	if c.Proto == "udp" {
		return 17
	}
	return 6
}

// sameAs lists where a sink's final record differs from the ClickHouse row.
func (r sinkRecord) sameAs(ch Row) []string {
	var bad []string
	cmp := func(field string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			bad = append(bad, fmt.Sprintf("%s = %v, ClickHouse has %v", field, got, want))
		}
	}
	cmp("flowType", r.FlowType, ch.FlowType)
	cmp("sourcePodName", r.SourcePod, ch.SourcePod)
	cmp("sourceNodeName", r.SourceNode, ch.SourceNode)
	cmp("destinationPodName", r.DestinationPod, ch.DestinationPod)
	cmp("destinationNodeName", r.DestinationNode, ch.DestinationNode)
	cmp("destinationServicePortName", r.ServicePortName, ch.ServicePortName)
	cmp("sourceIP", r.SourceIP, ch.SourceIP)
	cmp("destinationIP", r.DestinationIP, ch.DestinationIP)
	cmp("octetTotalCount", r.OctetTotal, ch.OctetTotal)
	cmp("reverseOctetTotalCount", r.ReverseOctetTotal, ch.ReverseOctetTotal)
	cmp("ingressNetworkPolicy", r.IngressPolicy, ch.IngressPolicy)
	cmp("egressNetworkPolicy", r.EgressPolicy, ch.EgressPolicy)
	if r.ies != 0 && r.ies != 70 {
		bad = append(bad, fmt.Sprintf("%d information elements, want the 70 of Antrea's aggregate layout", r.ies))
	}
	if r.kindsKnown {
		cmp("sourceEndpointKind", r.SourceKind, ch.SourceKind)
		cmp("destinationEndpointKind", r.DestinationKind, ch.DstKnd)
		cmp("correlationState", r.CorrelationState, ch.CorrelationState)
	}
	return bad
}

// fromIPFIX reads the compared fields out of a record the go-ipfix collector
// decoded (its text rendering: numbers in decimal, addresses in text).
func fromIPFIX(r ipfixcollector.Record) sinkRecord {
	f := r.Fields
	u := func(name string) uint64 { v, _ := strconv.ParseUint(f[name], 10, 64); return v }
	policy := func(dir string) string {
		return policyString(f[dir+"NetworkPolicyNamespace"], f[dir+"NetworkPolicyName"], f[dir+"NetworkPolicyRuleName"], u(dir+"NetworkPolicyRuleAction"))
	}
	src, dst := f["sourceIPv4Address"], f["destinationIPv4Address"]
	if src == "" {
		src, dst = f["sourceIPv6Address"], f["destinationIPv6Address"]
	}
	return sinkRecord{
		Protocol: uint8(u("protocolIdentifier")), SourcePort: uint16(u("sourceTransportPort")), FlowType: uint8(u("flowType")),
		SourcePod: f["sourcePodName"], SourceNode: f["sourceNodeName"],
		DestinationPod: f["destinationPodName"], DestinationNode: f["destinationNodeName"],
		ServicePortName: f["destinationServicePortName"], End: uint32(u("flowEndSeconds")),
		OctetTotal: u("octetTotalCount"), ReverseOctetTotal: u("reverseOctetTotalCount"),
		PacketTotal: u("packetTotalCount"), ReversePacketTotal: u("reversePacketTotalCount"),
		SourceIP: src, DestinationIP: dst, ies: len(r.Names),
		IngressPolicy: policy("ingress"), EgressPolicy: policy("egress"),
	}
}

// policyString is a policy's fields as Row and Expect hold them.
func policyString(namespace, name, rule string, action uint64) string {
	return fmt.Sprintf("%s/%s/%s/%d", namespace, name, rule, action)
}

// fromFlowRecord reads the compared fields out of a decoded OTLP flow record.
func fromFlowRecord(r *flowrecord.Record) sinkRecord {
	addr := func(a interface{ IsValid() bool }) string {
		if !a.IsValid() {
			return ""
		}
		return fmt.Sprint(a)
	}
	return sinkRecord{
		Protocol: r.Protocol, SourcePort: r.Source.Port, FlowType: uint8(r.FlowType),
		SourcePod: r.Source.PodName, SourceNode: r.Source.NodeName,
		DestinationPod: r.Destination.PodName, DestinationNode: r.Destination.NodeName,
		ServicePortName: r.Service.PortName,
		SourceKind:      r.Source.Kind.String(), DestinationKind: r.Destination.Kind.String(),
		CorrelationState: r.Correlation.String(), kindsKnown: true,
		End:        uint32(r.End.Unix()),
		OctetTotal: r.Stats.OctetTotal, ReverseOctetTotal: r.ReverseStats.OctetTotal,
		PacketTotal: r.Stats.PacketTotal, ReversePacketTotal: r.ReverseStats.PacketTotal,
		SourceIP: addr(r.Source.Address), DestinationIP: addr(r.Destination.Address),
		IngressPolicy: policyString(r.IngressPolicy.Namespace, r.IngressPolicy.Name, r.IngressPolicy.RuleName, uint64(r.IngressPolicy.RuleAction)),
		EgressPolicy:  policyString(r.EgressPolicy.Namespace, r.EgressPolicy.Name, r.EgressPolicy.RuleName, uint64(r.EgressPolicy.RuleAction)),
	}
}

// ipfixSink keeps every record the go-ipfix collector decodes. The collector
// holds only its last 4096 records and forgets them when it restarts, so the
// sink polls it often and keeps what it saw.
type ipfixSink struct {
	col  *ipfixcollector.Collector
	br   *bridge
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	seen   map[string]bool
	recs   []sinkRecord
	paused bool
}

func newIPFIXSink(t testing.TB, col *ipfixcollector.Collector, br *bridge) *ipfixSink {
	s := &ipfixSink{col: col, br: br, stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]bool{}}
	go s.poll()
	t.Cleanup(func() { close(s.stop); <-s.done })
	return s
}

func (s *ipfixSink) poll() {
	defer close(s.done)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.collect()
		}
	}
}

// collect adds the records the collector holds that the sink has not seen. A
// record is told apart by its message (export time, sequence number), its
// place in the message and its content.
func (s *ipfixSink) collect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused {
		return
	}
	recs, err := s.col.Records()
	if err != nil {
		return // restarting
	}
	for _, r := range recs {
		id := fmt.Sprintf("%d/%d/%d/%d/%s", r.ObsDomainID, r.ExportTime, r.SequenceNum, r.RecordIdx, r.Data)
		if !s.seen[id] {
			s.seen[id] = true
			s.recs = append(s.recs, fromIPFIX(r))
		}
	}
}

// Records returns every record seen so far.
func (s *ipfixSink) Records() []sinkRecord {
	s.collect()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkRecord(nil), s.recs...)
}

// restart stops the collector mid-flow and starts it again with an empty
// store. The sink must not lose sight of what the collector decoded before it
// went down: the bridge stops handing it bytes, the collector gets time to
// decode what it has, the sink takes all of it, and only then does the bridge
// drop the gateways' connections (counting what TCP had acknowledged) and the
// collector stop. New connections are refused until it is back.
func (s *ipfixSink) restart(t testing.TB, down time.Duration) {
	s.br.pause()
	s.settle(t)
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
	s.br.cut()
	s.col.Stop()
	time.Sleep(down)
	s.col.Restart(t)
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
	s.br.restore()
}

// settle collects until the collector has decoded everything it was handed:
// no new record over three polls (it decodes asynchronously, and slowly on a
// loaded machine).
func (s *ipfixSink) settle(t testing.TB) {
	deadline := time.Now().Add(10 * time.Second)
	s.mu.Lock()
	before := len(s.recs)
	s.mu.Unlock()
	for quiet := 0; quiet < 3 && time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		s.collect()
		s.mu.Lock()
		n := len(s.recs)
		s.mu.Unlock()
		if n == before {
			quiet++
		} else {
			quiet, before = 0, n
		}
	}
}

// otlpSink is an OTLP/gRPC receiver in the test process: what a gateway's
// `otlp` exporter sends lands in a LogsSink and is decoded with flowrecord.
type otlpSink struct {
	endpoint string
	sink     *consumertest.LogsSink
}

func startOTLPSink(t testing.TB) *otlpSink {
	t.Helper()
	s := &otlpSink{sink: new(consumertest.LogsSink)}
	s.endpoint = startOTLPReceiver(t, s.sink)
	return s
}

// startOTLPReceiver runs an OTLP/gRPC receiver in the test process that hands
// what it receives to next, until the test ends; it returns its endpoint.
func startOTLPReceiver(t testing.TB, next consumer.Logs) string {
	t.Helper()
	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	grpc := cfg.Protocols.GRPC.GetOrInsertDefault()
	grpc.NetAddr.Endpoint = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg.Protocols.HTTP = configoptional.None[otlpreceiver.HTTPConfig]()
	set := receivertest.NewNopSettings(factory.Type())
	set.ID = component.NewIDWithName(factory.Type(), "e2e")
	rcv, err := factory.CreateLogs(context.Background(), set, cfg, next)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, rcv.Shutdown(context.Background())) })
	return grpc.NetAddr.Endpoint
}

// Records decodes every log record received so far; one that is not a flow
// record is an error.
func (s *otlpSink) Records() ([]sinkRecord, error) {
	recs, err := s.flowRecords()
	out := make([]sinkRecord, 0, len(recs))
	for i := range recs {
		out = append(out, fromFlowRecord(&recs[i]))
	}
	return out, err
}

// flowRecords decodes every log record received so far.
func (s *otlpSink) flowRecords() ([]flowrecord.Record, error) {
	var out []flowrecord.Record
	for _, ld := range s.sink.AllLogs() {
		for i := range ld.ResourceLogs().Len() {
			sls := ld.ResourceLogs().At(i).ScopeLogs()
			for j := range sls.Len() {
				lrs := sls.At(j).LogRecords()
				for k := range lrs.Len() {
					var r flowrecord.Record
					if err := attrcodec.Decode(lrs.At(k), &r); err != nil {
						return nil, fmt.Errorf("OTLP sink: %w", err)
					}
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}
