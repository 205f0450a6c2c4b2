//go:build integration

package k8scertificatesextension

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/testbed/controlplane"
)

func newProvisioner(t *testing.T, cp *controlplane.ControlPlane, namespace string, now func() time.Time) *provisioner {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Namespace = namespace
	if _, err := cp.Admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !bytes.Contains([]byte(err.Error()), []byte("already exists")) {
		t.Fatal(err)
	}
	return &provisioner{client: cp.Admin, cfg: cfg, logger: zaptest.NewLogger(t), now: now}
}

func secretData(t *testing.T, cp *controlplane.ControlPlane, namespace, name string) map[string][]byte {
	t.Helper()
	s, err := cp.Admin.CoreV1().Secrets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Secret %s/%s: %v", namespace, name, err)
	}
	return s.Data
}

func mustCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCertificate(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProvisionRace: four provisioners at once on an empty namespace make
// one gateway CA and one node CA, and every certificate chains to them.
func TestProvisionRace(t *testing.T) {
	cp := controlplane.Start(t)
	defer controlplane.CloseIdleConnections(cp.Admin)
	const ns = "race"
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		p := newProvisioner(t, cp, ns, time.Now)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.ensure(context.Background())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	gwCA := secretData(t, cp, ns, "flowtel-gateway-ca-key")
	if got := secretData(t, cp, ns, "flowtel-gateway-ca")[keyCACert]; !bytes.Equal(got, gwCA[keyCACert]) {
		t.Error("flowtel-gateway-ca is not the CA in flowtel-gateway-ca-key: two CAs were made")
	}
	for _, name := range []string{"flowtel-gateway-tls", "flowtel-flowstream-tls"} {
		if got := secretData(t, cp, ns, name)[keyCACert]; !bytes.Equal(got, gwCA[keyCACert]) {
			t.Errorf("%s carries another gateway CA than flowtel-gateway-ca-key", name)
		}
	}
	if len(secretData(t, cp, ns, "flowtel-gateway-ca")) != 1 {
		t.Error("flowtel-gateway-ca holds more than ca.crt (the Pods mount it: no key may be in it)")
	}
	checkChains(t, cp, ns, time.Now())

	// A second pass over current Secrets writes nothing.
	written, err := newProvisioner(t, cp, ns, time.Now).ensure(context.Background())
	if err != nil || len(written) != 0 {
		t.Errorf("second pass: wrote %v, %v; want nothing", written, err)
	}
}

// checkChains verifies each certificate against the CA its hop requires, and
// not against the other, at time at.
func checkChains(t *testing.T, cp *controlplane.ControlPlane, ns string, at time.Time) {
	t.Helper()
	pool := func(name string) *x509.CertPool {
		p := x509.NewCertPool()
		p.AddCert(mustCert(t, secretData(t, cp, ns, name)[keyCACert]))
		return p
	}
	gw, node := pool("flowtel-gateway-ca"), pool("flowtel-node-ca")
	for _, c := range []struct {
		secret, dns   string
		usage         x509.ExtKeyUsage
		trusted, not  *x509.CertPool
		trustedByName string
	}{
		{"flowtel-gateway-tls", "flowtel-gateway." + ns + ".svc", x509.ExtKeyUsageServerAuth, gw, node, "gateway CA"},
		{"flowtel-gateway-tls", "", x509.ExtKeyUsageClientAuth, gw, node, "gateway CA"},
		{"flowtel-flowstream-tls", "flowtel-flowstream." + ns + ".svc", x509.ExtKeyUsageServerAuth, gw, node, "gateway CA"},
		{"flowtel-node-tls", "", x509.ExtKeyUsageClientAuth, node, gw, "node CA"},
	} {
		data := secretData(t, cp, ns, c.secret)
		if _, err := parseKeyPair(data[keyTLSCert], data[keyTLSKey]); err != nil {
			t.Errorf("%s: %v", c.secret, err)
		}
		cert := mustCert(t, data[keyTLSCert])
		opts := x509.VerifyOptions{CurrentTime: at, Roots: c.trusted, DNSName: c.dns, KeyUsages: []x509.ExtKeyUsage{c.usage}}
		if _, err := cert.Verify(opts); err != nil {
			t.Errorf("%s (%v) does not verify against the %s: %v", c.secret, c.usage, c.trustedByName, err)
		}
		opts.Roots = c.not
		if _, err := cert.Verify(opts); err == nil {
			t.Errorf("%s verifies against the other hop's CA", c.secret)
		}
	}
	nodeCert := mustCert(t, secretData(t, cp, ns, "flowtel-node-tls")[keyTLSCert])
	if _, err := nodeCert.Verify(x509.VerifyOptions{CurrentTime: at, Roots: node, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("the node certificate may serve: it should be a client certificate only")
	}
}

// TestRenewal: a certificate within renew_before of expiry is reissued at the
// next check, by the same CA; the CA Secrets are not written.
func TestRenewal(t *testing.T) {
	cp := controlplane.Start(t)
	defer controlplane.CloseIdleConnections(cp.Admin)
	const ns = "renewal"
	start := time.Now()
	if _, err := newProvisioner(t, cp, ns, func() time.Time { return start }).ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string][]byte{}
	for _, name := range []string{"flowtel-gateway-ca-key", "flowtel-node-ca-key", "flowtel-gateway-tls", "flowtel-node-tls"} {
		before[name] = secretData(t, cp, ns, name)
	}
	// 61 days on: 29 days left of 90, less than renew_before (30 days).
	later := start.Add(61 * 24 * time.Hour)
	p := newProvisioner(t, cp, ns, func() time.Time { return later })
	written, err := p.ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"flowtel-gateway-tls", "flowtel-node-tls", "flowtel-flowstream-tls"}
	if !equalSets(written, want) {
		t.Errorf("renewal wrote %v, want %v (the leaf certificates only)", written, want)
	}
	for _, name := range []string{"flowtel-gateway-ca-key", "flowtel-node-ca-key"} {
		if !bytes.Equal(secretData(t, cp, ns, name)[keyCAKey], before[name][keyCAKey]) {
			t.Errorf("%s changed on renewal: the CA must be kept", name)
		}
	}
	for _, name := range []string{"flowtel-gateway-tls", "flowtel-node-tls"} {
		old, renewed := mustCert(t, before[name][keyTLSCert]), mustCert(t, secretData(t, cp, ns, name)[keyTLSCert])
		if !renewed.NotAfter.After(old.NotAfter) {
			t.Errorf("%s not renewed: expires %s, was %s", name, renewed.NotAfter, old.NotAfter)
		}
		if bytes.Equal(secretData(t, cp, ns, name)[keyTLSKey], before[name][keyTLSKey]) {
			t.Errorf("%s renewed with the same key", name)
		}
	}
	checkChains(t, cp, ns, later)

	// 10 days on from a fresh set: nothing to do.
	if written, err := newProvisioner(t, cp, ns, func() time.Time { return later.Add(10 * 24 * time.Hour) }).ensure(context.Background()); err != nil || len(written) != 0 {
		t.Errorf("10 days after renewal: wrote %v, %v; want nothing", written, err)
	}
}

// TestForeignSecretsLeftAlone: a Secret of one of the names that the
// extension did not make (deploy/certs.sh, cert-manager) stops it from
// writing anything.
func TestForeignSecretsLeftAlone(t *testing.T) {
	cp := controlplane.Start(t)
	defer controlplane.CloseIdleConnections(cp.Admin)
	const ns = "own"
	p := newProvisioner(t, cp, ns, time.Now)
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "flowtel-node-tls"}, Data: map[string][]byte{"tls.crt": []byte("mine")}}
	if _, err := cp.Admin.CoreV1().Secrets(ns).Create(context.Background(), mine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	written, err := p.ensure(context.Background())
	if !errors.Is(err, errNotOurs) || len(written) != 0 {
		t.Fatalf("with a foreign flowtel-node-tls: wrote %v, err %v; want nothing and errNotOurs", written, err)
	}
	list, err := cp.Admin.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || string(list.Items[0].Data["tls.crt"]) != "mine" {
		t.Errorf("the namespace holds %d Secrets; want only the foreign one, unchanged", len(list.Items))
	}
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s] == 0 {
			return false
		}
		seen[s]--
	}
	return true
}
