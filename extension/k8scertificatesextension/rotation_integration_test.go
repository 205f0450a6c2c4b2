//go:build integration

package k8scertificatesextension

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flowtel/flowtel/extension/k8scertificatesextension/internal/metadata"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

// bundleOf parses every certificate of a PEM bundle.
func bundleOf(t *testing.T, b []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

// leafChecks are the leaf Secrets, with the CA Secret that signs them and
// how their hop verifies them.
var leafChecks = []struct {
	secret, ca, bundle, dns string
	usage                   x509.ExtKeyUsage
}{
	{"flowtel-gateway-tls", "flowtel-gateway-ca-key", "flowtel-gateway-ca", "flowtel-gateway.%s.svc", x509.ExtKeyUsageServerAuth},
	{"flowtel-flowstream-tls", "flowtel-gateway-ca-key", "flowtel-gateway-ca", "flowtel-flowstream.%s.svc", x509.ExtKeyUsageServerAuth},
	{"flowtel-node-tls", "flowtel-node-ca-key", "flowtel-node-ca", "", x509.ExtKeyUsageClientAuth},
}

// chainCheck verifies every leaf at time at against its own Secret's ca.crt
// and against the published bundle (<name>-ca, which the peers mount), and
// checks that no leaf outlives the CA that signed it.
func chainCheck(t *testing.T, cp *controlplane.ControlPlane, ns string, at time.Time) {
	t.Helper()
	for _, c := range leafChecks {
		data := secretData(t, cp, ns, c.secret)
		leaf := mustCert(t, data[keyTLSCert])
		dns := ""
		if c.dns != "" {
			dns = fmt.Sprintf(c.dns, ns)
		}
		for _, b := range []struct {
			what string
			pem  []byte
		}{
			{c.secret + " ca.crt", data[keyCACert]},
			{c.bundle + " ca.crt", secretData(t, cp, ns, c.bundle)[keyCACert]},
		} {
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(b.pem)
			chains, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: at, DNSName: dns, KeyUsages: []x509.ExtKeyUsage{c.usage}})
			if err != nil {
				t.Errorf("at %s: %s does not verify against %s: %v", at.UTC().Format(time.RFC3339), c.secret, b.what, err)
				continue
			}
			if root := chains[0][len(chains[0])-1]; leaf.NotAfter.After(root.NotAfter) {
				t.Errorf("%s ends %s, after the CA that signed it (%s)", c.secret, leaf.NotAfter, root.NotAfter)
			}
		}
	}
}

// TestCARotation: a CA close to expiry gets a successor published beside it
// in every bundle; when it has less than a certificate's validity left, the
// successor signs and every leaf is reissued by it while the old CA stays
// trusted; after the old CA expires it leaves the bundles. At every step the
// leaves verify against the Secrets' bundles, the leaves of the step before
// verify against the new bundles (peers one kubelet sync behind), and the
// CA Secrets' keys are never foreign to the extension.
func TestCARotation(t *testing.T) {
	cp := controlplane.Start(t)
	defer controlplane.CloseIdleConnections(cp.Admin)
	const ns = "rotation"
	ctx := context.Background()
	start := time.Now()
	if _, err := newProvisioner(t, cp, ns, func() time.Time { return start }).ensure(ctx); err != nil {
		t.Fatal(err)
	}
	oldCA := mustCert(t, secretData(t, cp, ns, "flowtel-gateway-ca-key")[keyCACert])
	end := oldCA.NotAfter
	day := 24 * time.Hour

	at := func(when time.Time) {
		t.Helper()
		if _, err := newProvisioner(t, cp, ns, func() time.Time { return when }).ensure(ctx); err != nil {
			t.Fatalf("check at %s: %v", when, err)
		}
		chainCheck(t, cp, ns, when)
	}

	// 100 days before the CA expires (within ca_renew_before, 180 days): the
	// successor is published; the old CA still signs.
	at(end.Add(-100 * day))
	for _, name := range []string{"flowtel-gateway-ca", "flowtel-node-ca"} {
		if n := len(bundleOf(t, secretData(t, cp, ns, name)[keyCACert])); n != 2 {
			t.Errorf("%s holds %d CAs 100 days before expiry; want the old and its successor", name, n)
		}
	}
	if !mustCert(t, secretData(t, cp, ns, "flowtel-gateway-ca-key")[keyCACert]).Equal(oldCA) {
		t.Error("the old CA stopped signing before it had less than a certificate's validity left")
	}
	before := map[string]*x509.Certificate{}
	for _, c := range leafChecks {
		before[c.secret] = mustCert(t, secretData(t, cp, ns, c.secret)[keyTLSCert])
	}

	// 60 days before (less than validity, 90 days): the successor signs,
	// every leaf is reissued by it, the old CA is still in the bundles.
	switchAt := end.Add(-60 * day)
	at(switchAt)
	newCA := mustCert(t, secretData(t, cp, ns, "flowtel-gateway-ca-key")[keyCACert])
	if newCA.Equal(oldCA) || !newCA.NotAfter.After(end) {
		t.Fatalf("60 days before expiry the gateway CA is not renewed (expires %s)", newCA.NotAfter)
	}
	for _, c := range leafChecks {
		leaf := mustCert(t, secretData(t, cp, ns, c.secret)[keyTLSCert])
		ca := mustCert(t, secretData(t, cp, ns, c.ca)[keyCACert])
		if err := leaf.CheckSignatureFrom(ca); err != nil {
			t.Errorf("%s not reissued by the new CA of %s: %v", c.secret, c.ca, err)
		}
		// The leaf of before the switch, which a peer may still present
		// until its kubelet syncs, is trusted by the new bundle.
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(secretData(t, cp, ns, c.bundle)[keyCACert])
		if _, err := before[c.secret].Verify(x509.VerifyOptions{Roots: roots, CurrentTime: switchAt, KeyUsages: []x509.ExtKeyUsage{c.usage}}); err != nil {
			t.Errorf("the bundle %s after the switch rejects the %s of before it: %v", c.bundle, c.secret, err)
		}
	}
	// The new leaves outlast the old CA.
	chainCheck(t, cp, ns, end.Add(day))

	// After the old CA expired: it leaves the bundles.
	at(end.Add(day))
	for _, name := range []string{"flowtel-gateway-ca", "flowtel-node-ca"} {
		if n := len(bundleOf(t, secretData(t, cp, ns, name)[keyCACert])); n != 1 {
			t.Errorf("%s holds %d CAs after the old one expired; want the new one alone", name, n)
		}
	}
}

// TestExpiredCANotOK: a CA found expired is replaced and the leaves chain
// to the new one; where it cannot be replaced (the extension may not write,
// or the Secrets are not its own) the check says ca_expiring, not ok.
func TestExpiredCANotOK(t *testing.T) {
	cp := controlplane.Start(t)
	defer controlplane.CloseIdleConnections(cp.Admin)
	ctx := context.Background()
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	tb, err := metadata.NewTelemetryBuilder(tel.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	c := &certificates{logger: zaptest.NewLogger(t), tel: tb}
	start := time.Now()
	outcomes := func() map[string]int64 { return sums(t, tel, "otelcol_extension_k8s_certificates_checks", "outcome") }

	// The extension may write: the expired CA is replaced.
	const ns = "expired"
	if _, err := newProvisioner(t, cp, ns, func() time.Time { return start }).ensure(ctx); err != nil {
		t.Fatal(err)
	}
	end := mustCert(t, secretData(t, cp, ns, "flowtel-gateway-ca-key")[keyCACert]).NotAfter
	later := end.Add(24 * time.Hour)
	c.check(ctx, newProvisioner(t, cp, ns, func() time.Time { return later }))
	if got := outcomes(); got["ok"] == 1 {
		for _, name := range []string{"flowtel-gateway-ca-key", "flowtel-node-ca-key"} {
			if ca := mustCert(t, secretData(t, cp, ns, name)[keyCACert]); !later.Before(ca.NotAfter) {
				t.Errorf("check ok while %s holds a CA expired at %s", name, ca.NotAfter)
			}
		}
		chainCheck(t, cp, ns, later)
	} else {
		t.Errorf("check of an expired CA it may replace: %v, want ok (replaced)", got)
	}

	// The extension may only read: the expired CA stays and the check says so.
	const ro = "readonly"
	if _, err := newProvisioner(t, cp, ro, func() time.Time { return start }).ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "secrets-get"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reader, err := kubernetes.NewForConfig(cp.Config(cp.ServiceAccount(t, ro, "reader", "secrets-get")))
	if err != nil {
		t.Fatal(err)
	}
	defer controlplane.CloseIdleConnections(reader)
	p := newProvisioner(t, cp, ro, func() time.Time { return later })
	p.client = reader
	c.check(ctx, p)
	if got := outcomes(); got["ca_expiring"] != 1 {
		t.Errorf("check of an expired CA it may not replace: %v, want one ca_expiring", got)
	}

	// Secrets it did not make (deploy/certs.sh) with an expired CA: it changes
	// nothing and says ca_expiring, not not_ours.
	const theirs = "theirs"
	p = newProvisioner(t, cp, theirs, func() time.Time { return later })
	old, err := newCA("their CA", start, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Admin.CoreV1().Secrets(theirs).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "flowtel-gateway-ca"},
		Data:       map[string][]byte{keyCACert: old.certPEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.check(ctx, p)
	if got := outcomes(); got["ca_expiring"] != 2 || got["not_ours"] != 0 {
		t.Errorf("check of foreign Secrets with an expired CA: %v, want a second ca_expiring", got)
	}
	if s := secretData(t, cp, theirs, "flowtel-gateway-ca"); !bytes.Equal(s[keyCACert], old.certPEM) || len(s) != 1 {
		t.Error("the foreign CA Secret was changed")
	}
}
