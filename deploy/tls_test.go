//go:build integration

package deploy_test

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flowtel/flowtel/distributions"
)

// secretFiles maps the Secrets deploy/certs.sh creates to the files it writes.
var secretFiles = map[string]map[string]string{
	"flowtel-gateway-tls":    {"tls.crt": "gateway.crt", "tls.key": "gateway.key", "ca.crt": "ca.crt"},
	"flowtel-gateway-ca":     {"ca.crt": "ca.crt"},
	"flowtel-node-tls":       {"tls.crt": "node.crt", "tls.key": "node.key", "ca.crt": "node-ca.crt"},
	"flowtel-node-ca":        {"ca.crt": "node-ca.crt"},
	"flowtel-flowstream-tls": {"tls.crt": "flowstream.crt", "tls.key": "flowstream.key", "ca.crt": "ca.crt"},
}

// The certificates deploy/certs.sh makes, mounted where each deployment path
// mounts them, and read with the TLS settings of the rendered node and gateway
// configurations, for every kustomize, Helm and Operator variant: the node
// collector's handshake with the gateway succeeds (server name, CA, client
// certificate), and a client without a certificate, with one from another CA
// or with an expired one is refused; only the named opt-outs accept a client
// without a certificate.
func TestTLSHandshakeWithCertsScript(t *testing.T) {
	// certs.sh's files per namespace (the gateway certificate names it), and
	// another CA's.
	certs := map[string]string{}
	certsFor := func(namespace string) string {
		if certs[namespace] == "" {
			certs[namespace] = t.TempDir()
			run(t, nil, filepath.Join(deployDir(), "certs.sh"), "--namespace", namespace, "--out", certs[namespace])
		}
		return certs[namespace]
	}
	otherDir := t.TempDir()
	run(t, nil, filepath.Join(deployDir(), "certs.sh"), "--out", otherDir)

	type variant struct {
		name string
		cols func(t *testing.T) (node, gw collector)
	}
	var variants []variant
	for _, r := range append(kustomizeVariants(t), helmVariants(t)...) {
		variants = append(variants, variant{r.name, func(t *testing.T) (collector, collector) {
			return nodeAndGateway(t, workloadCollectors(t, r.name, r.objs))
		}})
	}
	variants = append(variants, variant{"operator", func(t *testing.T) (collector, collector) {
		nodeCR, gwCR := operatorCRs(t)
		return operatorCollector(t, "operator", nodeCR), operatorCollector(t, "operator", gwCR)
	}})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			node, gw := v.cols(t)
			nodeRaw, gwRaw := node.validate(t), gw.validate(t)
			if nodeRaw == nil || gwRaw == nil {
				return
			}
			serverTLS := gatewayServerTLS(gwRaw)
			if serverTLS == nil {
				if optOuts[v.name] != optOutPlaintext {
					t.Fatalf("%s: the gateway receives plaintext", gw.source)
				}
				return
			}
			dir := certsFor(gw.namespace)
			expiredCert, expiredKey := expiredClientCert(t, dir, "node-ca")
			var client configtls.ClientConfig
			var server configtls.ServerConfig
			decodeTLS(t, node, at(nodeRaw, "exporters", "load_balancing", "protocol", "otlp", "tls"), dir, &client)
			decodeTLS(t, gw, serverTLS, dir, &server)
			if err := handshake(t, client, server); err != nil {
				t.Fatalf("node -> gateway TLS handshake: %v", err)
			}
			optOut := optOuts[v.name] == optOutNoClientAuth
			bad := badClients(client, filepath.Join(otherDir, "node"), expiredCert, expiredKey)
			// The gateway's own certificate is from the gateway CA, not the node CA.
			bad["with the gateway's certificate"] = withCert(client, filepath.Join(dir, "gateway"))
			for name, c := range bad {
				err := handshake(t, c, server)
				if !optOut && err == nil {
					t.Errorf("a client %s was accepted", name)
				}
				if optOut && name == "without a certificate" && err != nil {
					t.Errorf("opt-out %s refused a client without certificate: %v", optOutNoClientAuth, err)
				}
			}
		})
	}
}

// withCert is client TLS settings presenting another certificate (its
// files' path without .crt/.key).
func withCert(good configtls.ClientConfig, files string) configtls.ClientConfig {
	good.CertFile, good.KeyFile = files+".crt", files+".key"
	return good
}

// badClients are client TLS settings the gateway (or the fan-in) must
// refuse, made from good ones: without a certificate, with another CA's
// (other is its files' path without .crt/.key) and with an expired one.
func badClients(good configtls.ClientConfig, other, expiredCert, expiredKey string) map[string]configtls.ClientConfig {
	noCert, otherCA, expired := good, good, good
	noCert.CertFile, noCert.KeyFile = "", ""
	otherCA.CertFile, otherCA.KeyFile = other+".crt", other+".key"
	expired.CertFile, expired.KeyFile = expiredCert, expiredKey
	return map[string]configtls.ClientConfig{"without a certificate": noCert, "with another CA's certificate": otherCA, "with an expired certificate": expired}
}

// expiredClientCert signs, with a CA certs.sh wrote to dir (its files' name
// without .crt/.key: ca, the gateway CA, or node-ca), a client certificate
// that expired an hour ago, and returns its files.
func expiredClientCert(t *testing.T, dir, caName string) (certFile, keyFile string) {
	t.Helper()
	ca, err := tls.LoadX509KeyPair(filepath.Join(dir, caName+".crt"), filepath.Join(dir, caName+".key"))
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	_, certFile, keyFile = issueCert(t, caCert, ca.PrivateKey.(crypto.Signer), dir, "expired-"+caName, x509.ExtKeyUsageClientAuth, nil, time.Now().Add(-time.Hour))
	return certFile, keyFile
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

// The cert-manager component makes every Secret the base's collectors read
// TLS files from, each from a Certificate of the right usage: the gateway's
// names what the node collectors verify, the node collectors' is a client
// certificate; the gateway's chains to the CA whose Secret the node
// collectors mount, the node collectors' to the CA whose Secret the gateway
// mounts, and the two CAs differ.
func TestCertManagerCertificates(t *testing.T) {
	objs := objects(t, kustomize(t, "examples/cert-manager"))
	type cert struct {
		IsCA       bool     `json:"isCA"`
		SecretName string   `json:"secretName"`
		DNSNames   []string `json:"dnsNames"`
		Usages     []string `json:"usages"`
		IssuerRef  struct {
			Name string `json:"name"`
		} `json:"issuerRef"`
	}
	certs := map[string]cert{} // by Secret
	issuers := map[string]string{}
	for _, o := range find(objs, "Issuer") {
		if ca, ok, _ := unstructured.NestedString(o.Object, "spec", "ca", "secretName"); ok {
			issuers[o.GetName()] = ca
		}
	}
	for _, o := range find(objs, "Certificate") {
		var c cert
		spec, _, _ := unstructured.NestedMap(o.Object, "spec")
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &c); err != nil {
			t.Fatal(err)
		}
		certs[c.SecretName] = c
	}
	node, gw := nodeAndGateway(t, workloadCollectors(t, "kustomize examples/cert-manager", objs))
	nodeRaw, gwRaw := node.validate(t), gw.validate(t)
	if nodeRaw == nil || gwRaw == nil {
		return
	}
	want := map[string]string{} // Secret -> usage its certificate needs
	for _, c := range []struct {
		col   collector
		raw   any
		usage string
	}{
		{node, at(nodeRaw, "exporters", "load_balancing", "protocol", "otlp", "tls"), "client auth"},
		{gw, gatewayServerTLS(gwRaw), "server auth"},
	} {
		m, _ := c.raw.(map[string]any)
		for k, v := range m {
			s, _ := v.(string)
			if !strings.HasSuffix(k, "_file") || s == "" {
				continue
			}
			_, vol := mountOf(c.col.mounts, c.col.volumes, s)
			if vol == nil || vol.Secret == nil {
				t.Fatalf("%s: %s is not in a Secret volume", c.col.source, s)
			}
			if k == "ca_file" || k == "client_ca_file" {
				want[vol.Secret.SecretName] += ""
			} else {
				want[vol.Secret.SecretName] = c.usage
			}
		}
	}
	serverName, _ := at(nodeRaw, "exporters", "load_balancing", "protocol", "otlp", "tls", "server_name_override").(string)
	for secret, usage := range want {
		c, ok := certs[secret]
		if !ok {
			t.Errorf("Secret %s is mounted, but no Certificate makes it", secret)
			continue
		}
		if usage == "" {
			continue
		}
		if !slices.Contains(c.Usages, usage) {
			t.Errorf("Secret %s: usages %v, want %s", secret, c.Usages, usage)
		}
		wantCA := map[string]string{"server auth": "flowtel-gateway-ca", "client auth": "flowtel-node-ca"}[usage]
		if ca := certs[issuers[c.IssuerRef.Name]]; !ca.IsCA || issuers[c.IssuerRef.Name] != wantCA {
			t.Errorf("Secret %s: issued by %s, not by the CA in %s", secret, c.IssuerRef.Name, wantCA)
		}
		if usage == "server auth" && !slices.Contains(c.DNSNames, serverName) {
			t.Errorf("the gateway Certificate names %v; the node collectors verify %s", c.DNSNames, serverName)
		}
	}
	if len(want) != 4 {
		t.Errorf("TLS files come from Secrets %v, want the gateway's, the two CAs' and the node collectors'", want)
	}
	// The flow stream fan-in (components/flow-stream) serves with
	// flowtel-flowstream-tls and requires the gateways' certificate as client
	// certificate.
	if fs := certs["flowtel-flowstream-tls"]; !slices.Contains(fs.Usages, "server auth") || !slices.Contains(fs.DNSNames, "flowtel-flowstream.flowtel.svc") || issuers[fs.IssuerRef.Name] != "flowtel-gateway-ca" {
		t.Errorf("flowtel-flowstream-tls: %+v, want a server certificate for flowtel-flowstream.flowtel.svc from the CA in flowtel-gateway-ca", fs)
	}
	if gwCert := certs["flowtel-gateway-tls"]; !slices.Contains(gwCert.Usages, "client auth") {
		t.Errorf("flowtel-gateway-tls: usages %v, want client auth too (the gateways authenticate to the flow stream fan-in)", gwCert.Usages)
	}
}
