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
// your PKI): then the extension changes nothing.
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

// errNotOurs: a Secret of one of the extension's names exists without its label.
var errNotOurs = errors.New("not managed by the k8s_certificates extension")

// provisioner keeps the CAs and certificates of the two hops in Secrets.
type provisioner struct {
	client kubernetes.Interface
	cfg    *Config
	logger *zap.Logger
	now    func() time.Time
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

// foreign returns the names of the Secrets that exist without the label.
func (p *provisioner) foreign(ctx context.Context) ([]string, error) {
	var names []string
	for _, name := range p.secretNames() {
		s, err := p.client.CoreV1().Secrets(p.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s/%s: %w", p.cfg.Namespace, name, err)
		case s.Labels[managedByLabel] != managedByValue:
			names = append(names, name)
		}
	}
	return names, nil
}

// ensure makes every Secret exist, chain to its CA and stay valid for more
// than renew_before. It returns the names of the Secrets it wrote.
// Several gateways run it at once: Secrets are created only if absent and
// updated only at the resourceVersion read, so the first write wins and the
// others read what it wrote.
func (p *provisioner) ensure(ctx context.Context) ([]string, error) {
	if names, err := p.foreign(ctx); err != nil {
		return nil, err
	} else if len(names) > 0 {
		return nil, fmt.Errorf("the Secrets %v in %s: %w; the extension leaves every certificate alone (bring your own certificates)", names, p.cfg.Namespace, errNotOurs)
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

// ensureCA returns the CA kept in the Secret name, making it if absent. A CA
// is never replaced while it parses: every certificate the hops trust chains
// to it.
func (p *provisioner) ensureCA(ctx context.Context, name, commonName string) (keyPair, []string, error) {
	data, wrote, err := p.converge(ctx, name, func(cur map[string][]byte) (map[string][]byte, corev1.SecretType, error) {
		if cur != nil {
			if _, err := parseKeyPair(cur[keyCACert], cur[keyCAKey]); err == nil {
				return nil, "", nil
			}
			p.logger.Warn("CA Secret unreadable: making a new CA; every certificate is reissued", zap.String("secret", name))
		}
		ca, err := newCA(commonName, p.now(), p.cfg.CAValidity)
		if err != nil {
			return nil, "", err
		}
		return map[string][]byte{keyCACert: ca.certPEM, keyCAKey: ca.keyPEM}, corev1.SecretTypeOpaque, nil
	})
	if err != nil {
		return keyPair{}, nil, err
	}
	ca, err := parseKeyPair(data[keyCACert], data[keyCAKey])
	if err != nil {
		return keyPair{}, nil, fmt.Errorf("secret %s: %w", name, err)
	}
	if wrote {
		return ca, []string{name}, nil
	}
	return ca, nil, nil
}

// publishCA keeps the CA certificate alone (no key) in the Secret the Pods mount.
func (p *provisioner) publishCA(ca keyPair) func(map[string][]byte) (map[string][]byte, corev1.SecretType, error) {
	return func(cur map[string][]byte) (map[string][]byte, corev1.SecretType, error) {
		if cur != nil && bytes.Equal(cur[keyCACert], ca.certPEM) && len(cur) == 1 {
			return nil, "", nil
		}
		return map[string][]byte{keyCACert: ca.certPEM}, corev1.SecretTypeOpaque, nil
	}
}

// leaf keeps a certificate signed by ca, valid for more than renew_before,
// as tls.crt, tls.key and ca.crt.
func (p *provisioner) leaf(ca keyPair, spec leafSpec) func(map[string][]byte) (map[string][]byte, corev1.SecretType, error) {
	return func(cur map[string][]byte) (map[string][]byte, corev1.SecretType, error) {
		if cur != nil && p.current(cur, ca, spec) {
			return nil, "", nil
		}
		kp, err := issue(ca, spec, p.now(), p.cfg.Validity)
		if err != nil {
			return nil, "", err
		}
		return map[string][]byte{keyTLSCert: kp.certPEM, keyTLSKey: kp.keyPEM, keyCACert: ca.certPEM}, corev1.SecretTypeTLS, nil
	}
}

// current reports whether a leaf Secret may stay: its pair parses, it chains
// to ca, says what spec says, and is valid for more than renew_before.
func (p *provisioner) current(cur map[string][]byte, ca keyPair, spec leafSpec) bool {
	kp, err := parseKeyPair(cur[keyTLSCert], cur[keyTLSKey])
	if err != nil || !bytes.Equal(cur[keyCACert], ca.certPEM) {
		return false
	}
	if kp.cert.CheckSignatureFrom(ca.cert) != nil {
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
// resourceVersion read. A lost race (AlreadyExists, Conflict) reads again, so
// want sees the winner's data. It returns the data the Secret holds after.
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
		if data == nil {
			return curData, false, nil
		}
		if cur == nil {
			s := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.cfg.Namespace, Labels: map[string]string{managedByLabel: managedByValue}},
				Type:       typ,
				Data:       data,
			}
			_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
		} else {
			// The type is immutable and the extension's own Secrets keep theirs.
			next := cur.DeepCopy()
			next.Data = data
			_, err = secrets.Update(ctx, next, metav1.UpdateOptions{})
		}
		switch {
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
