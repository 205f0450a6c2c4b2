package antreaflowsreceiver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/flowtel/flowtel/exporter/ipfixexporter"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor"
)

// TestAgentPathWritesTheNativeRows: the same connections reported two ways
// reach ClickHouse as the same rows. Native: each Node's half as flowtel's
// node collector sends it (OTLP) into flow_correlation. Agent: each Node
// exports the same half in Antrea's agent layout (flowtel's ipfix exporter,
// record_layout agent, the Node's observation domain as an agent sets it)
// to antrea_flows, into flow_correlation. The rows compared are Antrea's 51
// columns of the flows table, read from the paired records with the
// catalogue's column accessors (the clickhouse_flows exporter writes them
// from the same).
func TestAgentPathWritesTheNativeRows(t *testing.T) {
	const cluster = "6b1c6c3e-0d4c-4a54-9f3a-3b7f0e3b5c11"
	halves := nativeHalves()

	// Native path.
	native := new(consumertest.LogsSink)
	corr := startCorrelation(t, native)
	for _, h := range halves {
		require.NoError(t, corr.ConsumeLogs(context.Background(), nodeLogs(h, cluster)))
	}

	// Agent path.
	agentOut := new(consumertest.LogsSink)
	g := startReceiverTo(t, startCorrelation(t, agentOut), func(c *Config) { c.ClusterUID = cluster })
	exporters := map[string]func(plog.Logs){}
	for _, node := range []string{"node-a", "node-b"} {
		exporters[node] = startAgentLayoutExporter(t, g.cfg.IPFIX.Endpoint, node)
	}
	for _, h := range halves {
		exporters[h.Reporter.NodeName](nodeLogs(h, cluster))
	}

	waitRecords(t, native, 3)
	waitRecords(t, agentOut, 3)
	nrecs, _ := records(t, native.AllLogs())
	arecs, _ := records(t, agentOut.AllLogs())
	require.Len(t, arecs, len(nrecs))
	for _, r := range append(nrecs, arecs...) {
		require.Equal(t, cluster, r.ClusterUID, "the cluster UID reaches the rows on either path")
	}
	paired := 0
	for _, r := range nrecs {
		if r.Correlation == flowrecord.CorrelationPaired {
			paired++
		}
	}
	require.Equal(t, 2, paired, "the ClusterIP and NodePort connections pair on the native path")
	byKey := map[string]flowrecord.Record{}
	for _, r := range arecs {
		byKey[r.Key] = r
	}
	for _, n := range nrecs {
		a, ok := byKey[n.Key]
		require.True(t, ok, "no agent-path record for %s", n.Key)
		assert.Equal(t, n.Correlation, a.Correlation, n.Key)
		assert.Equal(t, rowOf(&n), rowOf(&a), n.Key)
	}
}

// nativeHalves: an inter-Node connection through a ClusterIP and one to a
// NodePort (both halves each) and an intra-Node one,
// as k8s_flow writes them; times in whole seconds, as IPFIX carries them.
func nativeHalves() []flowrecord.Record {
	srcA, dstA := interNodeHalves(43512)
	a := flowrecord.Endpoint{Address: podA, Port: 43512, Kind: flowrecord.EndpointPod, Namespace: "default", PodName: "a", NodeName: "node-a"}
	web := flowrecord.Endpoint{Address: podB, Port: 8080, Kind: flowrecord.EndpointPod, Namespace: "default", PodName: "web", NodeName: "node-b"}
	base := flowrecord.Record{
		Start: srcA.Start, End: srcA.End, Observed: srcA.Observed, Protocol: 6, Source: a, Destination: web,
		Stats: srcA.Stats, ReverseStats: srcA.ReverseStats, EndReason: flowrecord.EndReasonActiveTimeout,
		TCPState: "ESTABLISHED", FlowType: flowrecord.FlowTypeInterNode,
	}
	src := base
	src.OriginalDestinationAddress, src.OriginalDestinationPort = cluster, 80
	src.Service = flowrecord.Service{PortName: "default/web:http", Address: cluster, Port: 80}
	src.EgressPolicy = srcA.EgressPolicy
	src.Reporter = flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideSource}
	dst := base
	dst.OriginalDestinationAddress, dst.OriginalDestinationPort = podB, 8080
	dst.IngressPolicy = dstA.IngressPolicy
	dst.Reporter = flowrecord.Reporter{NodeName: "node-b", Side: flowrecord.SideDestination}

	in := intraNode()
	intra := flowrecord.Record{
		Start: in.Start, End: in.End, Observed: in.Observed, Protocol: 17,
		Source:                     flowrecord.Endpoint{Address: podA, Port: 5353, Kind: flowrecord.EndpointPod, Namespace: "default", PodName: "a", NodeName: "node-a"},
		Destination:                flowrecord.Endpoint{Address: podC, Port: 53, Kind: flowrecord.EndpointPod, Namespace: "kube-system", PodName: "dns", NodeName: "node-a"},
		OriginalDestinationAddress: podC, OriginalDestinationPort: 53,
		Stats: in.Stats, EndReason: flowrecord.EndReasonEndOfFlow, FlowType: flowrecord.FlowTypeIntraNode,
		Reporter: flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideBoth},
	}
	// Pod a on node-a calls node-b's NodePort 30080; node-b DNATs it to Pod
	// web: the source half knows the NodePort, the destination half both.
	np := base
	np.Source.Port = 44000
	np.Destination = flowrecord.Endpoint{Address: nodeB, Port: 30080, Kind: flowrecord.EndpointNode, NodeName: "node-b"}
	np.OriginalDestinationAddress, np.OriginalDestinationPort = nodeB, 30080
	np.Reporter = flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideSource}
	npDst := base
	npDst.Source.Port = 44000
	npDst.OriginalDestinationAddress, npDst.OriginalDestinationPort = nodeB, 30080
	npDst.Service = flowrecord.Service{PortName: "default/web-np:http", Address: nodeB, Port: 30080}
	npDst.Reporter = flowrecord.Reporter{NodeName: "node-b", Side: flowrecord.SideDestination}

	out := []flowrecord.Record{src, dst, intra, np, npDst}
	for i := range out {
		out[i].Key = out[i].CorrelationKey()
	}
	return out
}

func nodeLogs(r flowrecord.Record, cluster string) plog.Logs {
	l := plog.NewLogs()
	rl := l.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(catalogue.ResourceNodeName, r.Reporter.NodeName)
	rl.Resource().Attributes().PutStr(catalogue.ResourceClusterUID, cluster)
	attrcodec.Encode(&r, rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
	return l
}

func startCorrelation(t *testing.T, next *consumertest.LogsSink) processor.Logs {
	f := flowcorrelationprocessor.NewFactory()
	p, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	return p
}

// startAgentLayoutExporter is a Node exporting in Antrea's agent layout, with
// the observation domain an agent on that Node uses.
func startAgentLayoutExporter(t *testing.T, endpoint, node string) func(plog.Logs) {
	f := ipfixexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*ipfixexporter.Config)
	cfg.Endpoint, cfg.Transport, cfg.RecordLayout = endpoint, "tcp", "agent"
	domain := fnv1(node)
	cfg.ObservationDomainID = &domain
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	exp, err := f.CreateLogs(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	return func(l plog.Logs) { require.NoError(t, exp.ConsumeLogs(context.Background(), l)) }
}

// rowOf is the record's row of Antrea's columns, by name.
func rowOf(r *flowrecord.Record) map[string]string {
	row := map[string]string{}
	for _, c := range catalogue.ClickHouseColumns() {
		if c.Antrea == 0 {
			continue
		}
		row[c.Name] = valueText(c.Value, r)
	}
	return row
}

func valueText(v catalogue.Value, r *flowrecord.Record) string {
	switch v.Kind {
	case catalogue.KindUint8, catalogue.KindEnum:
		return fmt.Sprint(v.Uint8(r))
	case catalogue.KindUint16:
		return fmt.Sprint(v.Uint16(r))
	case catalogue.KindUint32:
		return fmt.Sprint(v.Uint32(r))
	case catalogue.KindUint64:
		return fmt.Sprint(v.Uint64(r))
	case catalogue.KindBool:
		return fmt.Sprint(v.Bool(r))
	case catalogue.KindTime:
		return v.Time(r).UTC().Format(time.RFC3339Nano)
	case catalogue.KindAddr:
		return v.Addr(r).String()
	case catalogue.KindString:
		return v.String(r)
	case catalogue.KindLabels:
		return fmt.Sprint(v.Labels(r))
	}
	return "?"
}
