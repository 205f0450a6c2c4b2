//go:build integration

package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A client certificate from ClientCertificate authenticates to the API
// server, and the server publishes the client CA for extension servers.
func TestClientCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs the control-plane binaries (build.sh)")
	}
	cp := Start(t)
	ctx := context.Background()
	cert := cp.ClientCertificate(t, "alice", "devs")
	cfg := &rest.Config{Host: cp.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true,
		CertData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		KeyData:  mustKeyPEM(t, cert)}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { CloseIdleConnections(c) })
	ssr, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := ssr.Status.UserInfo; u.Username != "alice" || !slices.Contains(u.Groups, "devs") {
		t.Errorf("certificate user %+v, want alice in devs", u)
	}
	cm, err := cp.Admin.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["client-ca-file"], "BEGIN CERTIFICATE") {
		t.Errorf("client-ca-file not published: %q", cm.Data["client-ca-file"])
	}
}

func mustKeyPEM(t *testing.T, cert tls.Certificate) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
