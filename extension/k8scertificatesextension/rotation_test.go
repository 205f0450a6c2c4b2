package k8scertificatesextension

import (
	"bytes"
	"crypto/x509"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

var testSpec = leafSpec{
	commonName: "flowtel-gateway.flowtel.svc",
	dnsNames:   []string{"flowtel-gateway.flowtel.svc"},
	usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
}

// TestIssueCappedAtCA: a leaf issued by a CA with less than validity left
// ends when the CA does; an expired CA signs nothing.
func TestIssueCappedAtCA(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := newCA("test CA", t0, 100*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := issue(ca, testSpec, t0.Add(70*24*time.Hour), 90*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !leaf.cert.NotAfter.Equal(ca.cert.NotAfter) {
		t.Errorf("a leaf issued 30 days before its CA expires ends %s; want the CA's end %s", leaf.cert.NotAfter, ca.cert.NotAfter)
	}
	if _, err := issue(ca, testSpec, ca.cert.NotAfter.Add(time.Second), 90*24*time.Hour); err == nil {
		t.Error("an expired CA issued a certificate")
	}
}

func verifies(leaf *x509.Certificate, bundle []byte, at time.Time) error {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(bundle)
	_, err := leaf.Verify(x509.VerifyOptions{Roots: p, CurrentTime: at, DNSName: testSpec.dnsNames[0], KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// TestRotateSchedule: with an injected clock, a CA gets a published
// successor ca_renew_before ahead of its expiry, the successor signs from
// validity ahead, and the old CA leaves the bundle when it expires.
func TestRotateSchedule(t *testing.T) {
	day := 24 * time.Hour
	s := caSchedule{caValidity: 100 * day, caRenewBefore: 20 * day, leafValidity: 10 * day}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	set, what, err := rotate(nil, "test CA", t0, s)
	if err != nil || what != rotationMade {
		t.Fatalf("no CA: %v, %v; want one made", what, err)
	}
	first := set.active
	end := first.cert.NotAfter

	step := func(at time.Time, want rotation) {
		t.Helper()
		next, what, err := rotate(&set, "test CA", at, s)
		if err != nil {
			t.Fatal(err)
		}
		if what != want {
			t.Fatalf("at end%+v: %q, want %q", at.Sub(end), what, want)
		}
		// What is written is what is read back.
		if set, err = parseCASet(next.data()); err != nil {
			t.Fatal(err)
		}
	}
	step(end.Add(-21*day), rotationNone)
	if n, _ := parseCertificates(set.bundle()); len(n) != 1 {
		t.Fatalf("bundle of %d CAs before the renewal window; want 1", len(n))
	}
	step(end.Add(-19*day), rotationNext)
	if set.next == nil || !bytes.Equal(set.active.certPEM, first.certPEM) {
		t.Fatal("in the renewal window: want the old CA signing and a successor published")
	}
	successor := set.next.certPEM
	if n, _ := parseCertificates(set.bundle()); len(n) != 2 {
		t.Errorf("bundle of %d CAs with a successor; want old and new", len(n))
	}
	step(end.Add(-15*day), rotationNone)
	step(end.Add(-9*day), rotationSwitched)
	if !bytes.Equal(set.active.certPEM, successor) || set.next != nil || set.previous == nil || !set.previous.Equal(first.cert) {
		t.Fatal("with less than a leaf's validity left: want the successor signing and the old CA as previous")
	}
	if n, _ := parseCertificates(set.bundle()); len(n) != 2 {
		t.Errorf("bundle of %d CAs after the switch; want new and old", len(n))
	}
	step(end.Add(-time.Second), rotationNone)
	step(end.Add(time.Second), rotationDropped)
	if n, _ := parseCertificates(set.bundle()); len(n) != 1 || set.previous != nil {
		t.Errorf("bundle of %d CAs after the old CA expired; want the new one alone", len(n))
	}

	// A CA found expired (the extension did not run through its renewal
	// window) is replaced at once; the expired one is trusted by no one.
	stale := caSet{active: first}
	got, what, err := rotate(&stale, "test CA", end.Add(day), s)
	if err != nil || what != rotationReplaced {
		t.Fatalf("expired CA: %q, %v; want it replaced", what, err)
	}
	if !got.active.cert.NotAfter.After(end.Add(day)) || got.previous != nil || got.next != nil {
		t.Error("expired CA: want a new valid CA alone")
	}
}

// TestRotationKeepsTrust drives the provisioner's CA and leaf logic over
// three CA lifetimes, on the default schedule with hours for days (CAs of
// 1000 units) and a check every unit, and checks at every step that
// the leaf verifies against its bundle and never outlives its CA, and that a
// peer one step behind (kubelet sync) still trusts: the previous bundle
// verifies the new leaf and the new bundle the previous leaf.
func TestRotationKeepsTrust(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.CAValidity, cfg.CARenewBefore, cfg.Validity, cfg.RenewBefore = 1000*time.Hour, 180*time.Hour, 90*time.Hour, 30*time.Hour
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	p := &provisioner{cfg: cfg, logger: zaptest.NewLogger(t), now: func() time.Time { return now }}
	var (
		set        *caSet
		leafData   map[string][]byte
		prevBundle []byte
		prevLeaf   *x509.Certificate
		switches   int
	)
	for ; now.Before(t0.Add(3 * cfg.CAValidity)); now = now.Add(time.Hour) {
		next, what, err := rotate(set, "test CA", now, p.schedule())
		if err != nil {
			t.Fatal(err)
		}
		if what == rotationSwitched {
			switches++
		}
		if what == rotationReplaced {
			t.Fatalf("at %s a CA expired before it was renewed", now)
		}
		set = &next
		data, _, err := p.leaf(next, testSpec)(leafData)
		if err != nil {
			t.Fatal(err)
		}
		if data != nil {
			leafData = data
		}
		bundle := leafData[keyCACert]
		if !bytes.Equal(bundle, next.bundle()) {
			t.Fatalf("at %s the leaf Secret's ca.crt is not the published bundle", now)
		}
		leaf := mustParse(t, leafData[keyTLSCert])
		if leaf.NotAfter.After(next.active.cert.NotAfter) {
			t.Fatalf("at %s the leaf ends %s, after its CA (%s)", now, leaf.NotAfter, next.active.cert.NotAfter)
		}
		if err := verifies(leaf, bundle, now); err != nil {
			t.Fatalf("at %s the leaf does not verify against its bundle: %v", now, err)
		}
		if prevBundle != nil {
			if err := verifies(leaf, prevBundle, now); err != nil {
				t.Fatalf("at %s a peer with the bundle of the check before rejects the new leaf: %v", now, err)
			}
			if err := verifies(prevLeaf, bundle, now); err != nil {
				t.Fatalf("at %s the new bundle rejects the leaf of the check before: %v", now, err)
			}
		}
		prevBundle, prevLeaf = bundle, leaf
	}
	if switches < 2 {
		t.Errorf("%d CA switches in three CA lifetimes; want 2", switches)
	}
}

func mustParse(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCertificate(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCurrentRejectsLeafOutlivingCA: a leaf that ends after its CA (issued
// before the fix) is reissued.
func TestCurrentRejectsLeafOutlivingCA(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := newCA("test CA", t0, 100*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Signed directly, as issue signed before leaves were capped.
	long := ca.cert.NotAfter.Add(60 * 24 * time.Hour)
	tmpl := &x509.Certificate{Subject: ca.cert.Subject, NotBefore: t0, NotAfter: long}
	tmpl.Subject.CommonName = testSpec.commonName
	tmpl.DNSNames, tmpl.ExtKeyUsage = testSpec.dnsNames, testSpec.usages
	leaf, err := sign(tmpl, &ca)
	if err != nil {
		t.Fatal(err)
	}
	now := ca.cert.NotAfter.Add(-50 * 24 * time.Hour)
	p := &provisioner{cfg: cfg, now: func() time.Time { return now }}
	set := caSet{active: ca}
	if p.current(map[string][]byte{keyTLSCert: leaf.certPEM, keyTLSKey: leaf.keyPEM, keyCACert: set.bundle()}, ca, testSpec) {
		t.Error("a leaf that outlives its CA is current")
	}
}

// TestLeafKeptWhenBundleChanges: publishing a successor CA rewrites a
// current leaf Secret's ca.crt only; its key and certificate stay.
func TestLeafKeptWhenBundleChanges(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &provisioner{cfg: cfg, now: func() time.Time { return now }}
	ca, err := newCA("test CA", now, cfg.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	set := caSet{active: ca}
	first, _, err := p.leaf(set, testSpec)(nil)
	if err != nil {
		t.Fatal(err)
	}
	next, err := newCA("test CA", now, cfg.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	set.next = &next
	got, _, err := p.leaf(set, testSpec)(first)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || !bytes.Equal(got[keyCACert], set.bundle()) {
		t.Fatal("the leaf Secret's ca.crt is not the new bundle")
	}
	if !bytes.Equal(got[keyTLSKey], first[keyTLSKey]) || !bytes.Equal(got[keyTLSCert], first[keyTLSCert]) {
		t.Error("a current certificate was reissued because only its bundle changed")
	}
}
