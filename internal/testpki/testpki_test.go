package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
)

// handshake runs a mutual-TLS handshake on loopback between a server with
// serverCert that trusts clientCA and a client that trusts serverCA and
// presents clientCert, and returns the client's error.
func handshake(t *testing.T, serverCert tls.Certificate, clientCA, serverCA string, clientCert tls.Certificate) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serverCert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool(t, clientCA)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer func() { _ = ln.Close(); <-done }()
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool(t, serverCA), Certificates: []tls.Certificate{clientCert}})
	if err != nil {
		return err
	}
	defer c.Close()
	// With TLS 1.3 the server's verdict on the client certificate comes with the first read.
	_, err = c.Read(make([]byte, 1))
	if err != nil && strings.Contains(err.Error(), "EOF") {
		err = nil
	}
	return err
}

func pool(t *testing.T, caFile string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	return p
}

// keyPair issues a certificate from ca and loads it with its key.
func keyPair(t *testing.T, ca *CA, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	certFile, keyFile := ca.Issue(t, name, usage)
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// The CA's certificates verify on 127.0.0.1 for their usage; another CA's do not.
func TestIssuedCertificatesVerify(t *testing.T) {
	dir := t.TempDir()
	ca := NewCA(t, dir, "ca")
	server := keyPair(t, ca, "server", x509.ExtKeyUsageServerAuth)
	client := keyPair(t, ca, "client", x509.ExtKeyUsageClientAuth)
	other := NewCA(t, dir, "other-ca")
	stranger := keyPair(t, other, "stranger", x509.ExtKeyUsageClientAuth)

	if err := handshake(t, server, ca.CertFile, ca.CertFile, client); err != nil {
		t.Fatalf("mutual TLS with one CA: %v", err)
	}
	if err := handshake(t, server, ca.CertFile, other.CertFile, client); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("server certificate checked against another CA: err = %v, want unknown authority", err)
	}
	if err := handshake(t, server, ca.CertFile, ca.CertFile, stranger); err == nil {
		t.Fatal("the server accepted a client certificate another CA signed")
	}
	// A server certificate cannot authenticate a client.
	if err := handshake(t, server, ca.CertFile, ca.CertFile, server); err == nil {
		t.Fatal("the server accepted a certificate without client-auth usage")
	}
}
