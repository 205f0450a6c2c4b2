//go:build integration

package deploy_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"gopkg.in/yaml.v3"

	"github.com/flowtel/flowtel/extension/servertlsextension"
)

// Only the gateways may add to what the flow stream shows: with the
// certificates deploy/certs.sh makes, mounted as each deployment path mounts
// them, the gateway's otlp/flowstream exporter completes a handshake with the
// fan-in's OTLP receiver (the fan-in's name, the gateway's certificate as
// client certificate), and a client without a certificate, with another CA's
// or an expired one, or a node collector's (signed by the node CA, not the
// gateway CA) is refused — for kustomize, Helm and the Operator (whose
// gateway exporter is the snippet operator/flowstream.yaml tells users to
// add). The fan-in's TLS is served by the server_tls middleware, so each
// refusal is counted by reason: the rendered settings, served through the
// extension, count the node collector's certificate as unknown_authority.
// Helm's tls.mtls.enabled=false opts the fan-in out as well.
func TestFlowStreamFanInTLS(t *testing.T) {
	type variant struct {
		name string
		// gateway and fan-in collectors, and the gateway's otlp/flowstream TLS section
		cols func(t *testing.T) (gw, fanIn collector, exporterTLS any)
		// optOut: the fan-in accepts clients without a certificate
		optOut bool
	}
	fromWorkloads := func(source string, objs []byte) func(t *testing.T) (collector, collector, any) {
		return func(t *testing.T) (collector, collector, any) {
			var gw, fanIn collector
			for _, c := range workloadCollectors(t, source, objects(t, objs)) {
				switch {
				case strings.Contains(c.source, "StatefulSet"):
					gw = c
				case strings.Contains(c.source, "Deployment") && strings.Contains(c.source, "flowstream"):
					fanIn = c
				}
			}
			if gw.dist == "" || fanIn.dist == "" {
				t.Fatalf("%s: want a gateway StatefulSet and a flowstream Deployment", source)
			}
			raw := gw.validate(t)
			return gw, fanIn, at(raw, "exporters", "otlp/flowstream", "tls")
		}
	}
	helmWith := func(set ...string) []byte {
		args := []string{"template", "flowtel", chartDir(), "--namespace", "flowtel", "--set", "flowStream.enabled=true"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		return run(t, nil, helm(t), args...)
	}
	variants := []variant{
		{name: "kustomize examples/flow-stream", cols: fromWorkloads("kustomize examples/flow-stream", kustomize(t, "examples/flow-stream"))},
		{name: "helm flowStream.enabled", cols: fromWorkloads("helm flowStream.enabled", helmWith())},
		{name: "helm flowStream.enabled tls.mtls.enabled=false", cols: fromWorkloads("helm mtls off", helmWith("tls.mtls.enabled=false")), optOut: true},
		{name: "operator", cols: func(t *testing.T) (collector, collector, any) {
			_, gwCR := operatorCRs(t)
			crs := find(objects(t, readFile(t, "operator/flowstream.yaml")), "OpenTelemetryCollector")
			return operatorCollector(t, "operator", gwCR), operatorCollector(t, "operator/flowstream.yaml", crs[0]), operatorExporterSnippet(t)
		}},
	}
	dir := t.TempDir()
	run(t, nil, filepath.Join(deployDir(), "certs.sh"), "--namespace", "flowtel", "--out", dir)
	otherDir := t.TempDir()
	run(t, nil, filepath.Join(deployDir(), "certs.sh"), "--out", otherDir)
	expiredCert, expiredKey := expiredClientCert(t, dir, "ca")

	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			gw, fanIn, exporterTLS := v.cols(t)
			fanInRaw := fanIn.validate(t)
			if fanInRaw == nil {
				return
			}
			var client configtls.ClientConfig
			var server configtls.ServerConfig
			decodeTLS(t, gw, exporterTLS, dir, &client)
			checkCountingTLS(t, fanIn.source, fanInRaw)
			decodeTLS(t, fanIn, gatewayServerTLS(fanInRaw), dir, &server)
			if v.optOut != (server.ClientCAFile == "") {
				t.Errorf("fan-in client_ca_file %q, opt-out %v", server.ClientCAFile, v.optOut)
			}
			if err := handshake(t, client, server); err != nil {
				t.Fatalf("gateway -> fan-in TLS handshake: %v", err)
			}
			node := withCert(client, filepath.Join(dir, "node"))
			if !v.optOut {
				counted := countedHandshakes(t, server, client, node)
				if want := map[string]int64{"accepted": 1, "refused/unknown_authority": 1}; fmt.Sprint(counted) != fmt.Sprint(want) {
					t.Errorf("handshakes of the gateway's and a node collector's certificate counted %v, want %v", counted, want)
				}
			}
			bad := badClients(client, filepath.Join(otherDir, "gateway"), expiredCert, expiredKey)
			bad["with a node collector's certificate"] = node
			for name, c := range bad {
				err := handshake(t, c, server)
				switch {
				case !v.optOut && err == nil:
					t.Errorf("the fan-in accepted a client %s", name)
				case v.optOut && name == "without a certificate" && err != nil:
					t.Errorf("opt-out: the fan-in refused a client without certificate: %v", err)
				}
			}
		})
	}
}

// checkCountingTLS: the fan-in's OTLP port is served by the server_tls
// middleware, listed in service.extensions, with the same settings as the
// receiver's own tls block (used only if the middleware is removed).
func checkCountingTLS(t *testing.T, source string, raw map[string]any) {
	t.Helper()
	if !listsMiddleware(raw) {
		t.Errorf("%s: the OTLP receiver does not list the %s middleware: refused handshakes are not counted", source, countingTLS)
	}
	if !slices.Contains(anys(at(raw, "service", "extensions")), any(countingTLS)) {
		t.Errorf("%s: service.extensions %v lacks %s", source, at(raw, "service", "extensions"), countingTLS)
	}
	if own, counted := at(raw, "receivers", "otlp", "protocols", "grpc", "tls"), gatewayServerTLS(raw); fmt.Sprint(own) != fmt.Sprint(counted) {
		t.Errorf("%s: the receiver's tls %v differs from %s's %v", source, own, countingTLS, counted)
	}
}

// countedHandshakes serves server's settings through the server_tls
// extension, as the collector does, runs one handshake per client in order,
// and returns the extension's handshake counter by outcome (and reason).
func countedHandshakes(t *testing.T, server configtls.ServerConfig, clients ...configtls.ClientConfig) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(ctx) }()
	f := servertlsextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*servertlsextension.Config)
	cfg.TLS = server
	set := extensiontest.NewNopSettings(f.Type())
	set.TelemetrySettings = tel.NewTelemetrySettings()
	ext, err := f.Create(ctx, set, cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(t, ext.Shutdown(ctx)) }()
	opts, err := ext.(interface {
		GetGRPCServerOptions(context.Context) ([]grpc.ServerOption, error)
	}).GetGRPCServerOptions(ctx)
	require.NoError(t, err)
	srv := grpc.NewServer(opts...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	for _, c := range clients {
		ctls, err := c.LoadTLSConfig(ctx)
		require.NoError(t, err)
		ctls.NextProtos = []string{"h2"}
		if conn, err := tls.Dial("tcp", l.Addr().String(), ctls); err == nil {
			// A refusal after the client's side of a TLS 1.3 handshake shows on read.
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, _ = conn.Read(make([]byte, 1))
			conn.Close()
		}
	}
	out := map[string]int64{}
	require.Eventually(t, func() bool {
		clear(out)
		m, err := tel.GetMetric("otelcol_extension_server_tls_handshakes")
		if err != nil {
			return false
		}
		var n int64
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			key, _ := dp.Attributes.Value("outcome")
			k := key.AsString()
			if r, ok := dp.Attributes.Value("reason"); ok {
				k += "/" + r.AsString()
			}
			out[k] += dp.Value
			n += dp.Value
		}
		return n >= int64(len(clients))
	}, 5*time.Second, 20*time.Millisecond, "handshakes counted")
	return out
}

// operatorExporterSnippet is the otlp/flowstream exporter's TLS section that
// operator/flowstream.yaml's header tells users to add to gateway.yaml.
func operatorExporterSnippet(t *testing.T) any {
	t.Helper()
	var lines []string
	in := false
	for _, l := range strings.Split(string(readFile(t, "operator/flowstream.yaml")), "\n") {
		switch {
		case strings.HasPrefix(l, "#   otlp/flowstream:"):
			in = true
		case in && !strings.HasPrefix(l, "#    "):
			in = false
		}
		if in {
			lines = append(lines, strings.TrimPrefix(l, "# "))
		}
	}
	var snippet map[string]map[string]any
	if err := yaml.Unmarshal([]byte(strings.Join(lines, "\n")), &snippet); err != nil || snippet["otlp/flowstream"] == nil {
		t.Fatalf("operator/flowstream.yaml: no otlp/flowstream exporter snippet in its header (%v):\n%s", err, strings.Join(lines, "\n"))
	}
	return snippet["otlp/flowstream"]["tls"]
}
