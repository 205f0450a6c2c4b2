//go:build integration

package e2e

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/flowtel/flowtel/distributions"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/testbed/collector"
)

// BenchmarkGateway is the gateway load run: a synthetic load generator sends
// both Node halves of many inter-Node connections, flowrecord-encoded, to a
// collector that routes them as node collectors do (load_balancing on
// flow.key), in front of 1 or 3 gateway replicas (flow_correlation, OTLP out
// to a counting receiver in the test). Reported: paired records/s out,
// records/s in, pairing latency (from otelcol_processor_flow_correlation_pairing_duration),
// peak RSS of the gateways and their CPU. Records in == records out is checked
// with flowtel's own counters as the witness. Run: make load.
//
// The shapes differ in the Node → gateway hop (k8s_flow's encoding: the
// attribute form or the compact one, decision D13; and the load_balancing
// exporter's compression) and in the compression of the gateway's OTLP
// exporter to the sink (a user's choice; gzip is the exporter's default). One
// run goes through them in order, so a before/after comparison is one
// interleaved run (-count 2). The shipped node configuration is compact + zstd.
// The gateways run with the Go runtime settings of the shipped gateway
// container (GOGC, GOMEMLIMIT: deploy/kubernetes/base/gateway).
// FLOWTEL_BENCH_GATEWAY and FLOWTEL_BENCH_PERF are as for
// BenchmarkGatewayAntreaAgents (the profile is of the first replica).
func BenchmarkGateway(b *testing.B) {
	const conns = 200_000
	for _, sh := range loadShapes {
		b.Run(fmt.Sprintf("replicas=%d/conns=%d/encoding=%s/hop=%s/sink=%s", sh.replicas, conns, sh.hop.name, sh.hopCompression, sh.sinkCompression), func(b *testing.B) {
			for range b.N {
				benchmarkGateway(b, sh, conns)
			}
		})
	}
}

// hopEncodings are k8s_flow's encodings of the records node collectors send.
var hopEncodings = []struct {
	name   string
	encode func(*flowrecord.Record, plog.LogRecord)
}{{"attributes", attrcodec.Encode}, {"compact", compactcodec.Encode}}

// A loadShape is one configuration of the load run.
type loadShape struct {
	replicas int
	hop      struct {
		name   string
		encode func(*flowrecord.Record, plog.LogRecord)
	}
	hopCompression, sinkCompression string
}

var loadShapes = func() []loadShape {
	attrs, compact := hopEncodings[0], hopEncodings[1]
	var out []loadShape
	for _, replicas := range []int{1, 3} {
		out = append(out,
			loadShape{replicas, attrs, "gzip", "gzip"},   // before D13
			loadShape{replicas, compact, "gzip", "gzip"}, // D13
			loadShape{replicas, compact, "zstd", "gzip"}) // as shipped
		if replicas == 1 {
			out = append(out, loadShape{replicas, compact, "zstd", "zstd"}) // a sink that takes zstd
		}
	}
	return out
}()

// loadBatch is the number of records per OTLP request the generator sends.
const loadBatch = 1000

func benchmarkGateway(b *testing.B, sh loadShape, conns int) {
	replicas := sh.replicas
	b.StopTimer()
	gatewayBin := benchGatewayBinary(b)
	frontBin, err := collector.Binary(repoRoot, "flowtel")
	require.NoError(b, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Out: a receiver that counts records, and checks some of them are paired.
	var out, notPaired, undecodable atomic.Int64
	sink := startOTLPReceiver(b, countingConsumer(&out, &notPaired, &undecodable))

	dir := b.TempDir()
	runtimeEnv := shippedGatewayRuntimeEnv(b)
	var gateways []*collector.Process
	var endpoints []string
	for i := range replicas {
		port := freePort(b)
		g, _ := startCollector(b, ctx, collector.Options{Name: fmt.Sprintf("gateway-%d", i), Binary: gatewayBin, Dir: dir, Env: append(runtimeEnv, "POD_NAMESPACE=flowtel"),
			Configs: []string{distributions.Config(distributions.Gateway)}, Config: loadGatewayOverlay(port, sink, sh.sinkCompression)})
		gateways = append(gateways, g)
		endpoints = append(endpoints, fmt.Sprintf("127.0.0.1:%d", port))
	}
	frontPort := freePort(b)
	front, _ := startCollector(b, ctx, collector.Options{Name: "front", Binary: frontBin, Dir: dir,
		Config: loadFrontConfig(frontPort, endpoints, sh.hopCompression)})

	requests := loadRequests(conns, sh.hop.encode)
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", frontPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer cc.Close()
	client := plogotlp.NewGRPCClient(cc)

	peak := watchRSS(gateways)
	cpuBefore := cpuTimes(b, append(gateways, front))
	selfBefore := selfCPU()
	stopProfile := profileProcess(b, gateways[0])
	b.StartTimer()
	start := time.Now()
	send(b, ctx, client, requests)
	sent := time.Since(start)
	for out.Load() < int64(conns) && time.Since(start) < 5*time.Minute {
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpuAfter := cpuTimes(b, append(gateways, front))
	stopProfile()
	self := selfCPU() - selfBefore
	rss := peak.stop()

	// Witness: every record in came out, by flowtel's own counters.
	sum := func(ps []*collector.Process, name string) float64 {
		var total float64
		for _, p := range ps {
			m, err := p.Metrics(name)
			require.NoError(b, err)
			for k, v := range m {
				if strings.HasPrefix(k, name+"{") || k == name {
					total += v
				}
			}
		}
		return total
	}
	in := 2 * conns
	assert.Equal(b, float64(in), sum([]*collector.Process{front}, "otelcol_exporter_sent_log_records"), "records the front collector routed")
	assert.Equal(b, float64(in), sum(gateways, "otelcol_processor_flow_correlation_records_received"), "records the gateways received")
	assert.Equal(b, float64(conns), sum(gateways, "otelcol_processor_flow_correlation_pairs"), "pairs")
	assert.Equal(b, int64(conns), out.Load(), "paired records at the receiver")
	assert.Zero(b, notPaired.Load(), "records out that are not paired")
	assert.Zero(b, undecodable.Load(), "records out that do not decode or are not in the attribute form")
	for _, p := range append(gateways, front) {
		lost, err := lossCounters(p)
		require.NoError(b, err)
		assert.Empty(b, lost, "%s counted records as not delivered", p.Name)
	}

	p50, p99, mean := histogram(b, gateways, "otelcol_processor_flow_correlation_pairing_duration")
	b.ReportMetric(float64(conns)/elapsed.Seconds(), "paired-records/s")
	b.ReportMetric(float64(in)/sent.Seconds(), "records-in/s")
	b.ReportMetric(mean*1000, "pairing-mean-ms")
	b.ReportMetric(p50*1000, "pairing-p50-ms")
	b.ReportMetric(p99*1000, "pairing-p99-ms")
	var maxRSS, totalRSS int64
	for _, r := range rss {
		totalRSS += r
		maxRSS = max(maxRSS, r)
	}
	b.ReportMetric(float64(maxRSS)/(1<<20), "rss-MB/replica-peak")
	b.ReportMetric(float64(totalRSS)/(1<<20), "rss-MB-all-replicas")
	var gwCPU time.Duration
	for i := range gateways {
		gwCPU += cpuAfter[i] - cpuBefore[i]
	}
	b.ReportMetric(100*gwCPU.Seconds()/elapsed.Seconds(), "gateways-cpu-%/core")
	b.ReportMetric(100*(cpuAfter[len(gateways)]-cpuBefore[len(gateways)]).Seconds()/elapsed.Seconds(), "front-cpu-%/core")
	b.ReportMetric(float64(gwCPU.Microseconds())/float64(in), "gateway-cpu-µs/record-in")
	b.ReportMetric(100*self.Seconds()/elapsed.Seconds(), "generator+receiver-cpu-%/core")
}

// shippedGatewayRuntimeEnv is the Go runtime's settings (GOGC, GOMEMLIMIT)
// of the gateway container in the kustomize base, so the load run measures
// the gateway as it is deployed.
func shippedGatewayRuntimeEnv(b testing.TB) []string {
	env := shippedRuntimeEnv(b, "gateway/statefulset.yaml")
	require.Len(b, env, 2, "GOGC and GOMEMLIMIT of the gateway in deploy/kubernetes/base")
	return env
}

// shippedNodeRuntimeEnv is the node collector container's (GOMEMLIMIT), so
// that the bed's node collectors collect garbage as deployed ones do.
func shippedNodeRuntimeEnv(t testing.TB) []string {
	env := shippedRuntimeEnv(t, "node/daemonset.yaml")
	require.Len(t, env, 1, "GOMEMLIMIT of the node collector in deploy/kubernetes/base")
	return env
}

// shippedRuntimeEnv is the GOGC and GOMEMLIMIT of the containers of a
// workload in deploy/kubernetes/base (path under it).
func shippedRuntimeEnv(t testing.TB, path string) []string {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "kubernetes", "base", path))
	require.NoError(t, err)
	var w struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &w))
	var env []string
	for _, c := range w.Spec.Template.Spec.Containers {
		for _, v := range c.Env {
			if v.Name == "GOGC" || v.Name == "GOMEMLIMIT" {
				env = append(env, v.Name+"="+v.Value)
			}
		}
	}
	return env
}

// loadGatewayOverlay is what the shipped gateway configuration needs for the
// load run: plaintext OTLP on loopback, no Kubernetes index, the OTLP sink,
// and no node_identity (the load comes from no node collector's Pod: it has
// no token, and a token is never sent in plaintext).
func loadGatewayOverlay(otlpPort int, sink, compression string) string {
	return fmt.Sprintf(`
extensions:
  health_check: {endpoint: "127.0.0.1:HEALTH_PORT"}
receivers:
  otlp: {protocols: {grpc: {endpoint: "127.0.0.1:%d", tls: {enabled: false}, middlewares: []}}}
processors:
  flow_correlation: {kubernetes: {enabled: false}}
exporters:
  otlp: {endpoint: %q, compression: %s, tls: {insecure: true}}
service:
  pipelines:
    logs: {processors: [memory_limiter, flow_correlation], exporters: [otlp, signal_to_metrics]}
`+telemetry, otlpPort, sink, compression)
}

// loadFrontConfig is the node collectors' exporting half: load_balancing on
// flow.key in front of the gateways.
func loadFrontConfig(otlpPort int, gateways []string, compression string) string {
	return fmt.Sprintf(`
extensions:
  health_check: {endpoint: "127.0.0.1:HEALTH_PORT"}
receivers:
  otlp: {protocols: {grpc: {endpoint: "127.0.0.1:%d"}}}
exporters:
%sservice:
  extensions: [health_check]
  pipelines:
    logs: {receivers: [otlp], exporters: [load_balancing]}
`+telemetry, otlpPort, loadBalancing(gateways, compression))
}

// countingConsumer counts the records it gets and decodes every 100th to
// check it is a paired flow record in the attribute form (decoding all would load the machine the
// gateways run on).
func countingConsumer(out, notPaired, undecodable *atomic.Int64) consumer.Logs {
	c, _ := consumer.NewLogs(func(_ context.Context, ld plog.Logs) error {
		n := out.Add(int64(ld.LogRecordCount()))
		if n%100 < int64(ld.LogRecordCount()) {
			lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
			var r flowrecord.Record
			if err := attrcodec.Decode(lr, &r); err != nil || lr.Body().Type() != pcommon.ValueTypeEmpty {
				undecodable.Add(1) // or not in the attribute form, whatever came in
			} else if r.Correlation != flowrecord.CorrelationPaired {
				notPaired.Add(1)
			}
		}
		return nil
	})
	return c
}

// loadRequests builds, before the clock starts, what two node collectors send
// for conns inter-Node connections: per group of loadBatch connections, the
// source Node's halves, then the destination Node's. Each half is a complete
// record as k8s_flow emits it (Pods, Namespaces, Nodes, counters, key), in
// the encoding encode writes.
func loadRequests(conns int, encode func(*flowrecord.Record, plog.LogRecord)) []plogotlp.ExportRequest {
	now := time.Now()
	var reqs []plogotlp.ExportRequest
	for first := 0; first < conns; first += loadBatch {
		n := min(loadBatch, conns-first)
		srcLogs, dstLogs := plog.NewLogs(), plog.NewLogs()
		srcRecs := newNodeLogs(srcLogs, "load-node-a")
		dstRecs := newNodeLogs(dstLogs, "load-node-b")
		for i := first; i < first+n; i++ {
			src, dst := loadHalves(i, now)
			encode(src, srcRecs.AppendEmpty())
			encode(dst, dstRecs.AppendEmpty())
		}
		reqs = append(reqs, plogotlp.NewExportRequestFromLogs(srcLogs), plogotlp.NewExportRequestFromLogs(dstLogs))
	}
	return reqs
}

func newNodeLogs(ld plog.Logs, node string) plog.LogRecordSlice {
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("k8s.node.name", node)
	return rl.ScopeLogs().AppendEmpty().LogRecords()
}

// loadHalves is connection i as its source and destination Nodes report it.
func loadHalves(i int, now time.Time) (src, dst *flowrecord.Record) {
	mk := func() *flowrecord.Record {
		return &flowrecord.Record{
			Start: now.Add(-10 * time.Second), End: now, Observed: now, Protocol: 6, FlowType: flowrecord.FlowTypeInterNode,
			TCPState: "ESTABLISHED",
			Source: flowrecord.Endpoint{Address: netip.AddrFrom4([4]byte{10, 244, byte(i >> 16), byte(i >> 8)}), Port: uint16(10000 + i%50000),
				Kind: flowrecord.EndpointPod, Namespace: "shop", PodName: fmt.Sprintf("client-%d", i%500), NodeName: "load-node-a"},
			Destination: flowrecord.Endpoint{Address: netip.AddrFrom4([4]byte{10, 245, 0, byte(i)}), Port: 8080,
				Kind: flowrecord.EndpointPod, Namespace: "shop", PodName: fmt.Sprintf("server-%d", i%256), NodeName: "load-node-b"},
			OriginalDestinationAddress: netip.AddrFrom4([4]byte{10, 96, 0, 10}), OriginalDestinationPort: 80,
			Service:      flowrecord.Service{PortName: "shop/server:http"},
			Stats:        flowrecord.Counters{PacketTotal: 40, OctetTotal: 30000, PacketDelta: 40, OctetDelta: 30000},
			ReverseStats: flowrecord.Counters{PacketTotal: 30, OctetTotal: 20000, PacketDelta: 30, OctetDelta: 20000},
		}
	}
	src, dst = mk(), mk()
	src.Reporter = flowrecord.Reporter{NodeName: "load-node-a", Side: flowrecord.SideSource}
	dst.Reporter = flowrecord.Reporter{NodeName: "load-node-b", Side: flowrecord.SideDestination}
	// The source Node translated the ClusterIP: the destination Node's
	// conntrack sees the connection arrive for the endpoint, not DNATed.
	dst.OriginalDestinationAddress, dst.OriginalDestinationPort = dst.Destination.Address, dst.Destination.Port
	src.Key, dst.Key = src.CorrelationKey(), dst.CorrelationKey()
	return src, dst
}

// send exports the requests over 16 concurrent streams (enough to keep two
// cores busy; with 4 the run measured round trips, not capacity), in order
// within each.
func send(b *testing.B, ctx context.Context, client plogotlp.GRPCClient, reqs []plogotlp.ExportRequest) {
	const streams = 16
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Stream s sends pairs of requests (source halves, destination
			// halves of one group) s, s+streams, ...
			for i := 2 * s; i < len(reqs); i += 2 * streams {
				for _, r := range reqs[i:min(i+2, len(reqs))] {
					if _, err := client.Export(ctx, r); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
}

// rssWatch samples the processes' resident memory and keeps each one's peak.
type rssWatch struct {
	stopc chan struct{}
	done  chan []int64
}

func watchRSS(ps []*collector.Process) *rssWatch {
	w := &rssWatch{stopc: make(chan struct{}), done: make(chan []int64, 1)}
	go func() {
		peak := make([]int64, len(ps))
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for i, p := range ps {
				if r, err := p.RSS(); err == nil {
					peak[i] = max(peak[i], r)
				}
			}
			select {
			case <-w.stopc:
				w.done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *rssWatch) stop() []int64 { close(w.stopc); return <-w.done }

// selfCPU is the CPU time the test process (generator and receiver) used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cpuTimes(b *testing.B, ps []*collector.Process) []time.Duration {
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		var err error
		out[i], err = p.CPUTime()
		require.NoError(b, err)
	}
	return out
}

// histogram merges a Prometheus histogram across processes and returns its
// median and 99th percentile (upper bucket bounds) and mean, in its unit.
func histogram(b *testing.B, ps []*collector.Process, prefix string) (p50, p99, mean float64) {
	buckets := map[float64]float64{}
	var sum, count float64
	for _, p := range ps {
		m, err := p.Metrics(prefix)
		require.NoError(b, err)
		for k, v := range m {
			switch {
			case strings.Contains(k, "_bucket{"):
				_, le, ok := strings.Cut(k, `le="`)
				if !ok {
					continue
				}
				le, _, _ = strings.Cut(le, `"`)
				bound := math.Inf(1)
				if le != "+Inf" {
					bound, err = strconv.ParseFloat(le, 64)
					require.NoError(b, err)
				}
				buckets[bound] += v
			case strings.Contains(k, "_sum"):
				sum += v
			case strings.Contains(k, "_count"):
				count += v
			}
		}
	}
	require.Positive(b, count, "no %s samples", prefix)
	bounds := make([]float64, 0, len(buckets))
	for le := range buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	quantile := func(q float64) float64 {
		for _, le := range bounds { // buckets are cumulative
			if buckets[le] >= q*count {
				return le
			}
		}
		return math.Inf(1)
	}
	return quantile(0.5), quantile(0.99), sum / count
}

// loadBalancing is the node collectors' exporter: both halves of a connection
// carry the same flow.key, so routing on it sends them to the same gateway.
func loadBalancing(gateways []string, compression string) string {
	return fmt.Sprintf(`  load_balancing:
    routing_key: attributes
    routing_attributes: [flow.key]
    protocol: {otlp: {compression: %s, tls: {insecure: true}}}
    resolver: {static: {hostnames: [%s]}}
`, compression, strings.Join(gateways, ", "))
}
