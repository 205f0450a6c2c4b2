//go:build integration

package deploy_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/distributions"
)

// countingGateway is an OTLP logs server that counts the records it takes.
type countingGateway struct {
	plogotlp.UnimplementedGRPCServer
	records atomic.Int64
}

func (g *countingGateway) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	g.records.Add(int64(req.Logs().LogRecordCount()))
	return plogotlp.NewExportResponse(), nil
}

// hostWith is a component host offering extensions.
type hostWith map[component.ID]component.Component

func (h hostWith) GetExtensions() map[component.ID]component.Component { return h }

// A node collector that starts before its gateways (a new install: the
// gateway Pods are not ready yet, their EndpointSlice has no endpoint) is
// quiet: the node distribution's load_balancing exporter, on the shipped node
// settings with its persistent queue (file_storage) and the k8s resolver
// against a real API server, takes records while the resolver has no
// endpoint, logs none of the retries contrib's exporter and exporterhelper
// log one line per batch and retry ("couldn't find the exporter for the
// endpoint"), says once that it waits, and sends every record once the
// gateway's EndpointSlice appears: the records wait in the queue, none is
// lost.
func TestNodeStartsQuietlyBeforeGateways(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	const ns = "flowtel"
	_, err := c.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The gateway that the EndpointSlice will name, on an address of this
	// host's (EndpointSlices may not name loopback addresses).
	addr := hostAddress(t)
	lis, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	require.NoError(t, err)
	gw := &countingGateway{}
	srv := grpc.NewServer()
	plogotlp.RegisterGRPCServer(srv, gw)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	gwPort := lis.Addr().(*net.TCPAddr).Port

	// The shipped node configuration's exporter and storage, with the
	// environment the DaemonSet gives them; the resolver returns addresses
	// (no cluster DNS here) on the test gateway's port, in plaintext without
	// a token (no TLS or bearertokenauth in this test).
	t.Setenv("KUBECONFIG", c.kubeconfig) // the k8s resolver's client
	t.Setenv("POD_NAMESPACE", ns)
	t.Setenv("K8S_NODE_NAME", "node-1")
	t.Setenv("FLOWTEL_STORAGE_DIR", t.TempDir())
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{distributions.Config(distributions.Node)},
		ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
		DefaultScheme:     "env",
	})
	require.NoError(t, err)
	conf, err := resolver.Resolve(ctx)
	require.NoError(t, err)
	lbConf, err := conf.Sub("exporters::load_balancing")
	require.NoError(t, err)
	require.NoError(t, lbConf.Merge(confmap.NewFromStringMap(map[string]any{
		"protocol": map[string]any{"otlp": map[string]any{
			"auth": nil,
			"tls":  map[string]any{"insecure": true, "ca_file": "", "cert_file": "", "key_file": "", "server_name_override": ""},
		}},
		"resolver": map[string]any{"k8s": map[string]any{"ports": []any{gwPort}, "return_hostnames": false}},
	})))
	require.Equal(t, "flowtel-gateway."+ns, lbConf.Get("resolver::k8s::service"))
	storageConf, err := conf.Sub("extensions::file_storage")
	require.NoError(t, err)

	factories, err := distributions.Factories(distributions.Node)
	require.NoError(t, err)
	storageID := component.MustNewID("file_storage")
	sf := factories.Extensions[storageID.Type()]
	scfg := sf.CreateDefaultConfig()
	require.NoError(t, storageConf.Unmarshal(scfg))
	storage, err := sf.Create(ctx, extensiontest.NewNopSettings(sf.Type()), scfg)
	require.NoError(t, err)
	host := hostWith{storageID: storage}
	require.NoError(t, storage.Start(ctx, host))
	defer func() { require.NoError(t, storage.Shutdown(ctx)) }()

	f := factories.Exporters[component.MustNewType("load_balancing")]
	cfg := f.CreateDefaultConfig()
	require.NoError(t, lbConf.Unmarshal(cfg))
	core, logs := observer.New(zapcore.InfoLevel)
	set := exportertest.NewNopSettings(f.Type())
	set.Logger = zap.New(core)
	exp, err := f.CreateLogs(ctx, set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(ctx, host))
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()

	// The receiver's batches of the first seconds: more than the queue's ten
	// consumers, so each consumer retries a batch.
	const batches, perBatch = 30, 5
	for i := range batches {
		require.NoError(t, exp.ConsumeLogs(ctx, records(i*perBatch, perBatch)))
	}
	noExporter := func() int {
		return logs.Filter(func(e observer.LoggedEntry) bool {
			return strings.Contains(fmt.Sprint(e.ContextMap()["error"]), "couldn't find the exporter for the endpoint")
		}).Len()
	}
	waiting := func() int { return logs.FilterMessageSnippet("No gateway endpoint yet").Len() }

	// The gateways take their time: the exporter says once that it waits,
	// and nothing else.
	summary := func() string {
		all := logs.All()
		first := ""
		if len(all) > 0 {
			first = fmt.Sprintf("%s %v", all[0].Message, all[0].ContextMap())
		}
		msgs := map[string]int{}
		for _, e := range all {
			msgs[e.Level.String()+" "+e.Message]++
		}
		last := ""
		if len(all) > 0 {
			last = fmt.Sprintf("%s %v", all[len(all)-1].Message, all[len(all)-1].ContextMap())
		}
		return fmt.Sprintf("%d lines logged, %d of them retries logged with \"couldn't find the exporter\"; by message %v; the first: %s; the last: %s", len(all), noExporter(), msgs, first, last)
	}
	if !assert.Eventually(t, func() bool { return waiting() == 1 }, 40*time.Second, 200*time.Millisecond) {
		t.Fatalf("no line about the wait: %s", summary())
	}
	time.Sleep(8 * time.Second) // more retries
	require.Zero(t, noExporter(), "retries logged while the resolver has no endpoint: %s", summary())
	// They back off (1 s, then 1.5 times longer up to 10 s): a few per queue
	// consumer in the first 10 s, not a loop.
	held, _ := logs.FilterMessageSnippet("No gateway endpoint yet").All()[0].ContextMap()["retries_not_logged"].(int64)
	require.Less(t, held, int64(200), "retries in the first 10 s")
	require.Zero(t, gw.records.Load())

	// The gateway is ready: its EndpointSlice names it.
	ready := true
	_, err = c.Admin.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "flowtel-gateway-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: "flowtel-gateway"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Port: new(int32(gwPort))}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return gw.records.Load() >= batches*perBatch }, 90*time.Second, 200*time.Millisecond,
		"the gateway got %d of %d records", gw.records.Load(), batches*perBatch)
	require.Zero(t, noExporter())
	require.Equal(t, 1, waiting())
	t.Logf("%d records sent after the wait; %d log lines: %v", gw.records.Load(), logs.Len(), logs.All())
}

// hostAddress is an IPv4 address of this host's that is neither loopback nor
// link-local.
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatalf("no IPv4 address other than loopback on this host (EndpointSlices refuse loopback): %v", addrs)
	return ""
}
