//go:build integration

package deploy_test

import (
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/config/configtls"
	"gopkg.in/yaml.v3"
)

// Only the gateways may add to what the flow stream shows: with the
// certificates deploy/certs.sh makes, mounted as each deployment path mounts
// them, the gateway's otlp/flowstream exporter completes a handshake with the
// fan-in's OTLP receiver (the fan-in's name, the gateway's certificate as
// client certificate), and a client without a certificate, with another CA's
// or an expired one is refused — for kustomize, Helm and the Operator
// (whose gateway exporter is the snippet operator/flowstream.yaml tells users
// to add). Helm's tls.mtls.enabled=false opts the fan-in out as well.
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
	expiredCert, expiredKey := expiredClientCert(t, dir)

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
			decodeTLS(t, fanIn, at(fanInRaw, "receivers", "otlp", "protocols", "grpc", "tls"), dir, &server)
			if v.optOut != (server.ClientCAFile == "") {
				t.Errorf("fan-in client_ca_file %q, opt-out %v", server.ClientCAFile, v.optOut)
			}
			if err := handshake(t, client, server); err != nil {
				t.Fatalf("gateway -> fan-in TLS handshake: %v", err)
			}
			for name, c := range badClients(client, filepath.Join(otherDir, "gateway"), expiredCert, expiredKey) {
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
