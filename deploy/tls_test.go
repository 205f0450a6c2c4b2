//go:build integration

package deploy_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap"

	"github.com/flowtel/flowtel/distributions"
)

// secretFiles maps the Secrets deploy/certs.sh creates to the files it writes.
var secretFiles = map[string]map[string]string{
	"flowtel-gateway-tls": {"tls.crt": "gateway.crt", "tls.key": "gateway.key", "ca.crt": "ca.crt"},
	"flowtel-gateway-ca":  {"ca.crt": "ca.crt"},
	"flowtel-node-tls":    {"tls.crt": "node.crt", "tls.key": "node.key"},
}

// The certificates deploy/certs.sh makes, mounted where each deployment path
// mounts them, and read with the TLS settings of the rendered node and gateway
// configurations: the node collector's handshake with the gateway succeeds
// (server name, CA, client certificate), and under mTLS a client without a
// certificate is refused.
func TestTLSHandshakeWithCertsScript(t *testing.T) {
	dir := t.TempDir()
	run(t, nil, filepath.Join(deployDir(), "certs.sh"), "--out", dir)

	cases := []struct {
		name string
		cols func(t *testing.T) (node, gw collector)
		mtls bool
	}{
		{"kustomize deploy/kubernetes", func(t *testing.T) (collector, collector) {
			return nodeAndGateway(t, workloadCollectors(t, "kustomize", objects(t, kustomize(t, "."))))
		}, false},
		{"kustomize examples/clickhouse-mtls", func(t *testing.T) (collector, collector) {
			return nodeAndGateway(t, workloadCollectors(t, "kustomize", objects(t, kustomize(t, "examples/clickhouse-mtls"))))
		}, true},
		{"helm defaults", func(t *testing.T) (collector, collector) {
			return nodeAndGateway(t, workloadCollectors(t, "helm", objects(t, helmTemplate(t, "flowtel", "flowtel", ""))))
		}, false},
		{"helm all-sinks-mtls", func(t *testing.T) (collector, collector) {
			return nodeAndGateway(t, workloadCollectors(t, "helm", objects(t, helmTemplate(t, "flowtel", "flowtel", "ci/all-sinks-mtls-values.yaml"))))
		}, true},
		{"operator", func(t *testing.T) (collector, collector) {
			nodeCR, gwCR := operatorCRs(t)
			return operatorCollector(t, "operator", nodeCR), operatorCollector(t, "operator", gwCR)
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node, gw := tc.cols(t)
			nodeRaw, gwRaw := node.validate(t), gw.validate(t)
			if nodeRaw == nil || gwRaw == nil {
				return
			}
			var client configtls.ClientConfig
			var server configtls.ServerConfig
			decodeTLS(t, node, at(nodeRaw, "exporters", "load_balancing", "protocol", "otlp", "tls"), dir, &client)
			decodeTLS(t, gw, at(gwRaw, "receivers", "otlp", "protocols", "grpc", "tls"), dir, &server)
			if err := handshake(t, client, server); err != nil {
				t.Fatalf("node -> gateway TLS handshake: %v", err)
			}
			noCert := client
			noCert.CertFile, noCert.KeyFile = "", ""
			err := handshake(t, noCert, server)
			if tc.mtls && err == nil {
				t.Error("mTLS: a node collector without a client certificate was accepted")
			}
			if !tc.mtls && err != nil {
				t.Errorf("TLS without client authentication refused a client without certificate: %v", err)
			}
		})
	}
}

func nodeAndGateway(t *testing.T, cols []collector) (node, gw collector) {
	t.Helper()
	for _, c := range cols {
		switch c.dist {
		case distributions.Node:
			node = c
		case distributions.Gateway:
			gw = c
		}
	}
	if node.dist == "" || gw.dist == "" {
		t.Fatal("want a node and a gateway collector")
	}
	return node, gw
}

// decodeTLS unmarshals a TLS section, with each *_file replaced by the file
// certs.sh wrote for the Secret key mounted at that path.
func decodeTLS(t *testing.T, c collector, section any, dir string, into any) {
	t.Helper()
	m, ok := section.(map[string]any)
	if !ok {
		t.Fatalf("%s: no TLS section", c.source)
	}
	local := map[string]any{}
	for k, v := range m {
		s, isString := v.(string)
		if !strings.HasSuffix(k, "_file") || !isString || s == "" {
			local[k] = v
			continue
		}
		mount, vol := mountOf(c.mounts, c.volumes, s)
		if vol == nil || vol.Secret == nil {
			t.Fatalf("%s: %s %s is not in a Secret volume", c.source, k, s)
		}
		key := strings.TrimPrefix(strings.TrimPrefix(s, mount.MountPath), "/")
		for _, it := range vol.Secret.Items {
			if it.Path == key {
				key = it.Key
			}
		}
		secret := vol.Secret.SecretName
		file, ok := secretFiles[secret][key]
		if !ok {
			t.Fatalf("%s: %s reads key %s of Secret %s, which certs.sh does not create", c.source, k, key, secret)
		}
		local[k] = filepath.Join(dir, file)
	}
	if err := confmap.NewFromStringMap(local).Unmarshal(into); err != nil {
		t.Fatalf("%s: %v", c.source, err)
	}
}

// handshake runs a TLS handshake on loopback and returns the server's error.
func handshake(t *testing.T, client configtls.ClientConfig, server configtls.ServerConfig) error {
	t.Helper()
	ctx := context.Background()
	stls, err := server.LoadTLSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctls, err := client.LoadTLSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", stls)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	serverErr := make(chan error, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		err = conn.(*tls.Conn).Handshake()
		if err == nil {
			_, err = conn.Write([]byte("ok"))
		}
		serverErr <- err
	}()
	conn, err := tls.Dial("tcp", l.Addr().String(), ctls)
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 2)
		_, rerr := io.ReadFull(conn, buf)
		conn.Close()
		err = rerr
	}
	if sErr := <-serverErr; sErr != nil {
		return errors.Join(sErr, err)
	}
	return err
}
