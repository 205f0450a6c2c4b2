package k8scertificatesextension

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The label on every Secret the extension manages. A Secret of one of its
// names without it was made by someone else (deploy/certs.sh, cert-manager,
// your PKI): then the extension changes nothing. With owner_service_account,
// every Secret with the label also belongs to that ServiceAccount (an
// ownerReference), so Kubernetes deletes them with the install.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "flowtel-k8s-certificates"
)

// Secret keys, as the Pods mount them.
const (
	keyCACert  = "ca.crt"
	keyCAKey   = "ca.key"
	keyTLSCert = corev1.TLSCertKey
	keyTLSKey  = corev1.TLSPrivateKeyKey
)

var (
	// errNotOurs: a Secret of one of the extension's names exists without its label.
	errNotOurs = errors.New("not managed by the k8s_certificates extension")
	// errCAExpiring: a CA that signs is expired or within ca_renew_before of
	// expiry, and the check could not renew it.
	errCAExpiring = errors.New("CA expired or expiring, not renewed")
)

// provisioner keeps the CAs and certificates of the two hops in Secrets.
type provisioner struct {
	client kubernetes.Interface
	cfg    *Config
	logger *zap.Logger
	now    func() time.Time
	// owner is the reference every Secret it writes carries, read from
	// owner_service_account at the start of each check (nil without it).
	owner *metav1.OwnerReference
}

// readOwner reads owner_service_account and returns the reference the
// Secrets carry to it: not a controller, and blockOwnerDeletion false, so
// that setting it needs no permission on the ServiceAccount's finalizers. It
// is read at every check, so a ServiceAccount made anew (another UID) is
// followed.
func (p *provisioner) readOwner(ctx context.Context) (*metav1.OwnerReference, error) {
	name, ns := p.cfg.OwnerServiceAccount, p.cfg.Namespace
	if name == "" {
		return nil, nil
	}
	sa, err := p.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("owner_service_account: may not read ServiceAccount %s/%s, which the certificate Secrets belong to: grant get on serviceaccounts, resourceNames [%s], in namespace %s (the certificates Role): %w", ns, name, name, ns, err)
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("owner_service_account: ServiceAccount %s/%s, which the certificate Secrets would belong to, does not exist; set the gateway's own ServiceAccount (its Pods' serviceAccountName): %w", ns, name, err)
	case err != nil:
		return nil, fmt.Errorf("owner_service_account: reading ServiceAccount %s/%s: %w", ns, name, err)
	}
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "ServiceAccount", Name: sa.Name, UID: sa.UID, BlockOwnerDeletion: new(false)}, nil
}

// withOwner returns refs with p.owner in it, and whether they lacked it. A
// reference to a ServiceAccount of the same name with another UID (deleted
// and made anew) is replaced; every other reference is kept.
func (p *provisioner) withOwner(refs []metav1.OwnerReference) ([]metav1.OwnerReference, bool) {
	o := p.owner
	if o == nil {
		return refs, false
	}
	if slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == o.UID }) {
		return refs, false
	}
	out := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool {
		return r.APIVersion == o.APIVersion && r.Kind == o.Kind && r.Name == o.Name
	})
	return append(out, *o), true
}

// secretNames lists every Secret the provisioner writes, the CA keys first.
func (p *provisioner) secretNames() []string {
	c := p.cfg
	return []string{
		c.GatewayName + "-ca-key", c.NodeName + "-ca-key",
		c.GatewayName + "-ca", c.NodeName + "-ca",
		c.GatewayName + "-tls", c.NodeName + "-tls", c.FlowStreamName + "-tls",
	}
}

// foreign returns the names of the Secrets that exist without the label and,
// among all the Secrets of its names that exist, those whose trust bundle
// (ca.crt) has no CA valid for more than ca_renew_before: the extension
// renews none of them while any is foreign.
func (p *provisioner) foreign(ctx context.Context) (names, expiring []string, err error) {
	now := p.now()
	for _, name := range p.secretNames() {
		s, err := p.client.CoreV1().Secrets(p.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("reading Secret %s/%s: %w", p.cfg.Namespace, name, err)
		case s.Labels[managedByLabel] != managedByValue:
			names = append(names, name)
		}
		certs, err := parseCertificates(s.Data[keyCACert])
		if err != nil {
			continue
		}
		var last time.Time
		for _, c := range certs {
			if c.IsCA && c.NotAfter.After(last) {
				last = c.NotAfter
			}
		}
		if !last.IsZero() && p.schedule().expiring(last, now) {
			expiring = append(expiring, fmt.Sprintf("%s (CA expires %s)", name, last.UTC().Format(time.RFC3339)))
		}
	}
	return names, expiring, nil
}

// ensure makes every Secret exist, chain to its CA and stay valid for more
// than renew_before, and renews the CAs ahead of their expiry. It returns the
// names of the Secrets it wrote.
// Several gateways run it at once: Secrets are created only if absent and
// updated only at the resourceVersion read, so the first write wins and the
// others read what it wrote.
func (p *provisioner) ensure(ctx context.Context) ([]string, error) {
	names, expiring, err := p.foreign(ctx)
	if err != nil {
		return nil, err
	}
	if len(names) > 0 {
		err := fmt.Errorf("the Secrets %v in %s: %w; the extension leaves every certificate alone (bring your own certificates)", names, p.cfg.Namespace, errNotOurs)
		if len(expiring) > 0 {
			err = fmt.Errorf("%w: %v; renew them where they were made: %w", errCAExpiring, expiring, err)
		}
		return nil, err
	}
	// Nothing is written without the owner: a Secret made without it would
	// outlive the install.
	if p.owner, err = p.readOwner(ctx); err != nil {
		if len(expiring) > 0 {
			err = fmt.Errorf("%w: %v: %w", errCAExpiring, expiring, err)
		}
		return nil, err
	}
	c := p.cfg
	var written []string
	gatewayCA, w, err := p.ensureCA(ctx, c.GatewayName+"-ca-key", "flowtel gateway CA")
	if err != nil {
		return written, err
	}
	written = append(written, w...)
	nodeCA, w, err := p.ensureCA(ctx, c.NodeName+"-ca-key", "flowtel node CA")
	if err != nil {
		return written, err
	}
	written = append(written, w...)
	steps := []struct {
		name string
		fn   func(map[string][]byte) (map[string][]byte, corev1.SecretType, error)
	}{
		{c.GatewayName + "-ca", p.publishCA(gatewayCA)},
		{c.NodeName + "-ca", p.publishCA(nodeCA)},
		{c.GatewayName + "-tls", p.leaf(gatewayCA, leafSpec{
			commonName: c.serviceName(c.GatewayName),
			dnsNames:   []string{c.serviceName(c.GatewayName)},
			usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		})},
		{c.NodeName + "-tls", p.leaf(nodeCA, leafSpec{
			commonName: c.NodeName,
			usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})},
		{c.FlowStreamName + "-tls", p.leaf(gatewayCA, leafSpec{
			commonName: c.serviceName(c.FlowStreamName),
			dnsNames:   []string{c.serviceName(c.FlowStreamName)},
			usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})},
	}
	for _, s := range steps {
		_, wrote, err := p.converge(ctx, s.name, s.fn)
		if err != nil {
			return written, err
		}
		if wrote {
			written = append(written, s.name)
		}
	}
	return written, nil
}

// schedule is the CA schedule of the configuration.
func (p *provisioner) schedule() caSchedule {
	return caSchedule{caValidity: p.cfg.CAValidity, caRenewBefore: p.cfg.CARenewBefore, leafValidity: p.cfg.Validity}
}

// ensureCA returns the CAs kept in the Secret name, making the CA if absent
// or unreadable and rotating it ahead of its expiry (see rotate).
func (p *provisioner) ensureCA(ctx context.Context, name, commonName string) (caSet, []string, error) {
	var (
		seen *caSet // the set last read, for the error path
		what rotation
	)
	data, wrote, err := p.converge(ctx, name, func(cur map[string][]byte) (map[string][]byte, corev1.SecretType, error) {
		var curSet *caSet
		if cur != nil {
			if s, err := parseCASet(cur); err == nil {
				curSet, seen = &s, &s
			} else {
				p.logger.Warn("CA Secret unreadable: making a new CA; every certificate is reissued", zap.String("secret", name), zap.Error(err))
			}
		}
		next, w, err := rotate(curSet, commonName, p.now(), p.schedule())
		if err != nil {
			return nil, "", err
		}
		what = w
		if w == rotationNone {
			return nil, "", nil
		}
		return next.data(), corev1.SecretTypeOpaque, nil
	})
	if err != nil {
		if seen != nil && p.schedule().expiring(seen.active.cert.NotAfter, p.now()) {
			return caSet{}, nil, fmt.Errorf("%w: %s expires %s and was not renewed: %w", errCAExpiring, name, seen.active.cert.NotAfter.UTC().Format(time.RFC3339), err)
		}
		return caSet{}, nil, err
	}
	set, err := parseCASet(data)
	if err != nil {
		return caSet{}, nil, fmt.Errorf("secret %s: %w", name, err)
	}
	if !wrote {
		return set, nil, nil
	}
	p.logRotation(name, what, set, name == p.cfg.GatewayName+"-ca-key")
	return set, []string{name}, nil
}

// logRotation says what a CA write did and what it means for the Pods. Only
// the gateway CA is read by clients (ca_file) once at start: the node
// collectors, and the gateway towards the flow stream.
func (p *provisioner) logRotation(name string, what rotation, set caSet, readAtStart bool) {
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	restart := "no Pod needs a restart (the servers re-read their client CA file)"
	if readAtStart {
		restart = "Pods that read this bundle only at start (the node collectors' ca_file; with the flow stream, the gateway's) and started before the new CA was published reject the new certificates, from the switch on, until restarted"
	}
	switch what {
	case rotationMade:
		p.logger.Info("CA made", zap.String("secret", name), zap.String("expires", at(set.active.cert.NotAfter)))
	case rotationNext:
		p.logger.Info("CA renewal: a new CA is published beside the current one; certificates switch to it at switch_at",
			zap.String("secret", name), zap.String("restart", restart), zap.String("current_expires", at(set.active.cert.NotAfter)),
			zap.String("switch_at", at(set.active.cert.NotAfter.Add(-p.cfg.Validity))))
	case rotationSwitched:
		p.logger.Info("CA renewal: the new CA signs now and every certificate is reissued by it; the old CA stays trusted until it expires",
			zap.String("secret", name), zap.String("restart", restart), zap.String("old_expires", at(set.previous.NotAfter)), zap.String("new_expires", at(set.active.cert.NotAfter)))
	case rotationReplaced:
		p.logger.Warn("CA had expired: a new CA signs and every certificate is reissued",
			zap.String("secret", name), zap.String("restart", restart), zap.String("new_expires", at(set.active.cert.NotAfter)))
	case rotationDropped, rotationNextStale:
		p.logger.Info("CA bundle trimmed", zap.String("secret", name), zap.String("change", string(what)))
	}
}

// publishCA keeps the hop's trust bundle (certificates alone, no key) in the
// Secret the Pods mount.
func (p *provisioner) publishCA(cas caSet) func(map[string][]byte) (map[string][]byte, corev1.SecretType, error) {
	bundle := cas.bundle()
	return func(cur map[string][]byte) (map[string][]byte, corev1.SecretType, error) {
		if cur != nil && bytes.Equal(cur[keyCACert], bundle) && len(cur) == 1 {
			return nil, "", nil
		}
		return map[string][]byte{keyCACert: bundle}, corev1.SecretTypeOpaque, nil
	}
}

// leaf keeps a certificate signed by the active CA of cas, valid for more
// than renew_before, as tls.crt, tls.key and ca.crt (the hop's trust bundle).
// A current certificate whose bundle alone changed (a CA published or
// dropped) keeps its key and certificate.
func (p *provisioner) leaf(cas caSet, spec leafSpec) func(map[string][]byte) (map[string][]byte, corev1.SecretType, error) {
	bundle := cas.bundle()
	return func(cur map[string][]byte) (map[string][]byte, corev1.SecretType, error) {
		if cur != nil && p.current(cur, cas.active, spec) {
			if bytes.Equal(cur[keyCACert], bundle) && len(cur) == 3 {
				return nil, "", nil
			}
			return map[string][]byte{keyTLSCert: cur[keyTLSCert], keyTLSKey: cur[keyTLSKey], keyCACert: bundle}, corev1.SecretTypeTLS, nil
		}
		kp, err := issue(cas.active, spec, p.now(), p.cfg.Validity)
		if err != nil {
			return nil, "", err
		}
		return map[string][]byte{keyTLSCert: kp.certPEM, keyTLSKey: kp.keyPEM, keyCACert: bundle}, corev1.SecretTypeTLS, nil
	}
}

// current reports whether a leaf Secret's certificate may stay: its pair
// parses, it chains to ca and does not outlive it, says what spec says, and
// is valid for more than renew_before.
func (p *provisioner) current(cur map[string][]byte, ca keyPair, spec leafSpec) bool {
	kp, err := parseKeyPair(cur[keyTLSCert], cur[keyTLSKey])
	if err != nil {
		return false
	}
	if kp.cert.CheckSignatureFrom(ca.cert) != nil || kp.cert.NotAfter.After(ca.cert.NotAfter) {
		return false
	}
	if kp.cert.Subject.CommonName != spec.commonName || !slices.Equal(kp.cert.DNSNames, spec.dnsNames) || !slices.Equal(kp.cert.ExtKeyUsage, spec.usages) {
		return false
	}
	return kp.cert.NotAfter.Sub(p.now()) > p.cfg.RenewBefore
}

// maxAttempts bounds the retries after losing a race to another gateway.
const maxAttempts = 5

// converge reads the Secret name and asks want for its data: nil keeps it,
// anything else is written, created if absent or updated at the
// resourceVersion read. A Secret it keeps that lacks the owner gets it (not
// counted as written: its data is unchanged). A lost race (AlreadyExists,
// Conflict) reads again, so want sees the winner's data. It returns the data
// the Secret holds after and whether its data was written.
func (p *provisioner) converge(ctx context.Context, name string, want func(map[string][]byte) (map[string][]byte, corev1.SecretType, error)) (map[string][]byte, bool, error) {
	secrets := p.client.CoreV1().Secrets(p.cfg.Namespace)
	for range maxAttempts {
		cur, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cur, err = nil, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("reading Secret %s/%s: %w", p.cfg.Namespace, name, err)
		}
		var curData map[string][]byte
		if cur != nil {
			if cur.Labels[managedByLabel] != managedByValue {
				return nil, false, fmt.Errorf("secret %s/%s: %w", p.cfg.Namespace, name, errNotOurs)
			}
			curData = cur.Data
			if curData == nil {
				curData = map[string][]byte{}
			}
		}
		data, typ, err := want(curData)
		if err != nil {
			return nil, false, fmt.Errorf("secret %s/%s: %w", p.cfg.Namespace, name, err)
		}
		var refs []metav1.OwnerReference
		addOwner := false // the Secret exists without the owner
		if cur != nil {
			refs, addOwner = p.withOwner(cur.OwnerReferences)
		}
		if data == nil && !addOwner {
			return curData, false, nil
		}
		if cur == nil {
			s := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.cfg.Namespace, Labels: map[string]string{managedByLabel: managedByValue}},
				Type:       typ,
				Data:       data,
			}
			if p.owner != nil {
				s.OwnerReferences = []metav1.OwnerReference{*p.owner}
			}
			_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
		} else {
			// The type is immutable and the extension's own Secrets keep theirs.
			next := cur.DeepCopy()
			if data != nil {
				next.Data = data
			}
			next.OwnerReferences = refs
			_, err = secrets.Update(ctx, next, metav1.UpdateOptions{})
		}
		switch {
		case err == nil && data == nil:
			p.logger.Info("certificate Secret given its owner: Kubernetes deletes it with the ServiceAccount",
				zap.String("secret", name), zap.String("owner_service_account", p.owner.Name))
			return curData, false, nil
		case err == nil:
			return data, true, nil
		case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
			continue // another gateway wrote first: look at what it wrote
		default:
			return nil, false, fmt.Errorf("writing Secret %s/%s: %w", p.cfg.Namespace, name, err)
		}
	}
	return nil, false, fmt.Errorf("secret %s/%s: still changing after %d attempts", p.cfg.Namespace, name, maxAttempts)
}
