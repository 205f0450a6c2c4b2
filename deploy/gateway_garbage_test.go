//go:build integration

package deploy_test

import (
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	bedcollector "github.com/flowtel/flowtel/testbed/collector"
)

// gatewayAndNodeCert starts the built gateway (startGateway, connections
// kept an hour) with certificates of a fresh server CA and client CA, and
// returns it with the server CA and a node client certificate.
func gatewayAndNodeCert(t *testing.T, extra ...string) (gw *bedcollector.Process, port int, serverCA *ca, nodeCert, nodeKey string) {
	t.Helper()
	dir := t.TempDir()
	serverCA, clientCA := newTestCA(t, dir, "server-ca"), newTestCA(t, dir, "client-ca")
	day := time.Now().Add(24 * time.Hour)
	_, gwCert, gwKey := serverCA.issue(t, dir, "gateway", x509.ExtKeyUsageServerAuth, []string{gatewayTLSName}, day)
	_, nodeCert, nodeKey = clientCA.issue(t, dir, "node", x509.ExtKeyUsageClientAuth, nil, day)
	gw, port = startGateway(t, dir, gwCert, gwKey, clientCA.file, "1h", extra...)
	return gw, port, serverCA, nodeCert, nodeKey
}

// metricWith sums a counter's samples whose labels contain label (e.g.
// `reason="decode_error"`).
func metricWith(t *testing.T, p *bedcollector.Process, name, label string) float64 {
	t.Helper()
	m, err := p.Metrics(name)
	require.NoError(t, err)
	var sum float64
	for k, v := range m {
		if strings.Contains(k, label) {
			sum += v
		}
	}
	return sum
}

// A node collector (it holds a valid client certificate) that sends garbage:
// in one OTLP batch, good flow records and records with an attribute of the
// wrong type, without their 5-tuple, with a huge label map and with 100k
// attributes. The built gateway on its shipped configuration takes the batch,
// drops and counts each bad record (flow_correlation's records_dropped,
// reason decode_error) with an error naming the attribute, and the good
// records go through.
func TestGatewayRefusesGarbagePerRecord(t *testing.T) {
	gw, port, serverCA, nodeCert, nodeKey := gatewayAndNodeCert(t)

	built := time.Now()
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	good := func(i int) pcommon.Map {
		lr := lrs.AppendEmpty()
		lr.SetEventName("network.flow")
		lr.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		a := lr.Attributes()
		a.PutStr("source.address", "10.0.0.1")
		a.PutStr("destination.address", "10.0.0.2")
		a.PutInt("source.port", int64(40000+i))
		a.PutInt("destination.port", 80)
		a.PutInt("flow.protocol_identifier", 6)
		a.PutStr("flow.key", fmt.Sprintf("garbage-test-%d", i))
		return a
	}
	const goodRecords = 5
	for i := range goodRecords {
		good(i)
	}
	garbage := map[string]func(a pcommon.Map){
		"wrong type": func(a pcommon.Map) { a.PutStr("source.port", "eighty") },
		"no 5-tuple": func(a pcommon.Map) { a.Remove("source.address") },
		"huge labels": func(a pcommon.Map) {
			require.NoError(t, a.PutEmptyMap("source.k8s.pod.labels").FromRaw(bulk(100_000, "l", nil)))
		},
		"100k attributes": func(a pcommon.Map) {
			require.NoError(t, a.FromRaw(bulk(100_000, "x.", a.AsRaw())))
		},
	}
	i := goodRecords
	for _, mutate := range garbage {
		mutate(good(i))
		i++
	}

	t.Logf("batch built in %v", time.Since(built))
	start := time.Now()
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(t, serverCA.file, nodeCert, nodeKey))))
	require.NoError(t, err)
	defer cc.Close()
	_, err = plogotlp.NewGRPCClient(cc).Export(t.Context(), plogotlp.NewExportRequestFromLogs(ld))
	require.NoError(t, err, "the batch was refused as a whole")
	t.Logf("exported in %v", time.Since(start))

	const received, dropped = "otelcol_processor_flow_correlation_records_received", "otelcol_processor_flow_correlation_records_dropped"
	require.Eventually(t, func() bool { return metric(t, gw, received) == float64(goodRecords+len(garbage)) }, 10*time.Second, 200*time.Millisecond)
	got := metricWith(t, gw, dropped, `reason="decode_error"`)
	log := gw.Log()
	for _, attr := range []string{`\"source.port\"`, `\"source.address\"`, `\"source.k8s.pod.labels\": 100000 labels`, `record has 100006 attributes`} {
		if !strings.Contains(log, attr) {
			t.Errorf("no error names attribute %s", attr)
		}
	}
	require.Equal(t, float64(len(garbage)), got, "records dropped as decode_error")
	require.Zero(t, metricWith(t, gw, dropped, "reason=")-got, "good records dropped")
	t.Logf("gateway RSS after the batch: %v MB", must(gw.RSS())/1e6)
}

// bulk returns m (a new map if nil) with n more string entries prefix<i>:
// pcommon.Map.FromRaw takes them in linear time (Put* search the map first).
func bulk(n int, prefix string, m map[string]any) map[string]any {
	if m == nil {
		m = make(map[string]any, n)
	}
	for i := range n {
		m[fmt.Sprintf("%s%d", prefix, i)] = "v"
	}
	return m
}
