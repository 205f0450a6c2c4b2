package k8scertificatesextension

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// keyPair is a certificate with its private key, parsed and as PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// leafSpec is what a leaf certificate must say: the hops check the extended
// key usages and, for servers, the DNS name.
type leafSpec struct {
	commonName string
	dnsNames   []string
	usages     []x509.ExtKeyUsage
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// newCA makes a self-signed ECDSA P-256 root.
func newCA(commonName string, now time.Time, validity time.Duration) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour), // tolerate clocks a little behind
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	return sign(tmpl, nil)
}

// issue signs a leaf certificate for spec with ca. It never outlives ca: its
// NotAfter is capped at the CA's.
func issue(ca keyPair, spec leafSpec, now time.Time, validity time.Duration) (keyPair, error) {
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	if !notAfter.After(now) {
		return keyPair{}, fmt.Errorf("the CA %q expired at %s: it signs nothing", ca.cert.Subject.CommonName, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: spec.commonName},
		DNSNames:    spec.dnsNames,
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: spec.usages,
	}
	return sign(tmpl, &ca)
}

// sign makes a new key and signs tmpl with parent (nil: self-signed).
func sign(tmpl *x509.Certificate, parent *keyPair) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return keyPair{}, err
	}
	parentCert, parentKey := tmpl, key
	if parent != nil {
		parentCert, parentKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, &key.PublicKey, parentKey)
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// parseKeyPair reads a certificate and its EC private key from PEM.
func parseKeyPair(certPEM, keyPEM []byte) (keyPair, error) {
	cert, err := parseCertificate(certPEM)
	if err != nil {
		return keyPair{}, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return keyPair{}, errors.New("no PEM block in the key")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return keyPair{}, errors.New("the key does not belong to the certificate")
	}
	return keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// parseCertificates reads every CERTIFICATE block of a bundle; it fails on
// anything else or on an empty bundle.
func parseCertificates(bundle []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a PEM %s block in a certificate bundle", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return certs, nil
}

func parseCertificate(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return x509.ParseCertificate(block.Bytes)
}
