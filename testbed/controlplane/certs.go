package controlplane

// Certificates and keys the control plane issues: serving, client, service-account.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeServing writes a serving certificate signed by ClientCA for every name
// and address the API server is reached by: its own address, the first
// Service address (the kubernetes Service) and the Service's DNS names.
func (cp *ControlPlane) writeServing(t testing.TB, dir, address string) (certFile, keyFile string) {
	t.Helper()
	ips := []net.IP{net.ParseIP(address), net.ParseIP(firstServiceIPv4), net.IPv4(127, 0, 0, 1)}
	c := cp.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		IPAddresses: ips, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return cp.writeKeyPair(t, dir, "apiserver", c)
}

// firstServiceIPv4 is the kubernetes Service's address in ServiceCIDRv4.
const firstServiceIPv4 = "10.96.0.1"

// writeKeyPair writes c's certificate and key as PEM files named after name in dir.
func (cp *ControlPlane) writeKeyPair(t testing.TB, dir, name string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	must(t, err)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600))
	return certFile, keyFile
}

// WriteClientCertificate issues a client certificate for user in groups and
// writes it and its key into Dir, for a process's kubeconfig.
func (cp *ControlPlane) WriteClientCertificate(t testing.TB, user string, groups ...string) (certFile, keyFile string) {
	t.Helper()
	name := strings.NewReplacer(":", "-", "/", "-").Replace(user)
	return cp.writeKeyPair(t, cp.Dir, name, cp.ClientCertificate(t, user, groups...))
}

// writeClientCA creates the client CA and returns its certificate file.
func (cp *ControlPlane) writeClientCA(t testing.TB, dir string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flowtel-test-client-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	cp.ClientCA, err = x509.ParseCertificate(der)
	must(t, err)
	cp.clientCAKey = key
	path := filepath.Join(dir, "client-ca.crt")
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return path
}

// ClientCertificate issues a client certificate signed by ClientCA for user
// (the Common Name) in groups (the Organizations), as kube-apiserver maps them.
func (cp *ControlPlane) ClientCertificate(t testing.TB, user string, groups ...string) tls.Certificate {
	t.Helper()
	return cp.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// ServingCertificate writes a server certificate for 127.0.0.1 and
// localhost, signed by ClientCA, and returns its certificate and key files.
func (cp *ControlPlane) ServingCertificate(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	c := cp.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	must(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600))
	return certFile, keyFile
}

func (cp *ControlPlane) issue(t testing.TB, tmpl *x509.Certificate) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl.SerialNumber, err = rand.Int(rand.Reader, big.NewInt(1<<62))
	must(t, err)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, cp.ClientCA, &key.PublicKey, cp.clientCAKey)
	must(t, err)
	leaf, err := x509.ParseCertificate(der)
	must(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func writeServiceAccountKeys(t testing.TB, dir string) (keyPath, pubPath string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	must(t, err)
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	must(t, err)
	keyPath, pubPath = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	must(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	must(t, os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600))
	return keyPath, pubPath
}
