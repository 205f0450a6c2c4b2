//go:build integration

package deploy_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flowtel/flowtel/distributions"
	"github.com/flowtel/flowtel/extension/k8scertificatesextension"
	"github.com/flowtel/flowtel/internal/k8sclient"
)

// TestKustomizeMakesItsCertificates: deploy/kubernetes applied with nothing
// else, and the gateway's k8s_certificates extension run with the gateway
// ServiceAccount's token and only the shipped RBAC, creates every Secret the
// Pods mount, with every key they mount, and the certificates chain as the
// hops require (the node certificate to the node CA only). Every Secret it
// made belongs to the gateway's ServiceAccount, so `kubectl delete -k`
// deletes them.
func TestKustomizeMakesItsCertificates(t *testing.T) {
	c := startCluster(t)
	for _, dir := range []string{".", "examples/flow-stream"} {
		manifests := kustomize(t, dir)
		c.apply(t, "deploy/kubernetes/"+dir, manifests)
		objs := objects(t, manifests)
		if dir == "." {
			for _, v := range secretVolumes(t, objs) {
				if _, err := c.Admin.CoreV1().Secrets("flowtel").Get(context.Background(), v.SecretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Fatalf("Secret %s exists before the gateway ran (%v): the test proves nothing", v.SecretName, err)
				}
			}
		}
		settings, sa := shippedCertificates(t, "deploy/kubernetes/"+dir, objs)
		runCertificates(t, c, "flowtel", settings, sa, false)
		checkSecretVolumes(t, c, "deploy/kubernetes/"+dir, "flowtel", objs)
	}
	checkHops(t, c, "flowtel", "flowtel")
}

// TestHelmMakesItsCertificates: the same for `helm template` with the
// default values (tls.provision), a release "lab" in namespace "obs", as an
// upgrade: the Secrets an earlier version made without owner get theirs, so
// `helm uninstall` deletes them; and tls.provision=false renders no extension.
func TestHelmMakesItsCertificates(t *testing.T) {
	helm(t)
	c := startCluster(t)
	if out, err := c.kubectl(nil, "create", "namespace", "obs"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	manifests := helmTemplate(t, "lab", "obs", "")
	c.apply(t, "helm template", manifests)
	settings, sa := shippedCertificates(t, "helm template", objects(t, manifests))
	runCertificates(t, c, "obs", settings, sa, true)
	checkSecretVolumes(t, c, "helm template", "obs", objects(t, manifests))
	checkHops(t, c, "obs", "lab-flowtel")
	off := run(t, nil, helm(t), "template", "lab", chartDir(), "--namespace", "obs", "--set", "tls.provision=false")
	if strings.Contains(string(off), "k8s_certificates") || strings.Contains(string(off), "optional: true") {
		t.Error("tls.provision=false still runs the k8s_certificates extension or leaves the gateway's Secret volumes optional")
	}
}

// TestOperatorMakesItsCertificates: the same for the Operator CRs, whose
// gateway runs k8s_certificates from its one configuration (gateway.yaml's
// spec.config) with the Role rbac.yaml grants, the kustomize base's rules.
func TestOperatorMakesItsCertificates(t *testing.T) {
	c := startCluster(t)
	installOperatorCRD(t, c)
	var objs []*unstructured.Unstructured
	for _, f := range []string{"operator/rbac.yaml", "operator/node.yaml", "operator/gateway.yaml", "operator/flowstream.yaml"} {
		manifests := readFile(t, f)
		c.apply(t, f, manifests)
		objs = append(objs, objects(t, manifests)...)
	}
	for _, v := range secretVolumes(t, objs) {
		if _, err := c.Admin.CoreV1().Secrets("flowtel").Get(context.Background(), v.SecretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("Secret %s exists before the gateway ran (%v): the test proves nothing", v.SecretName, err)
		}
	}
	_, gw := operatorCRs(t)
	raw := operatorCollector(t, "operator", gw).validate(t)
	settings, ok := at(raw, "extensions", "k8s_certificates").(map[string]any)
	if !ok {
		t.Fatal("the gateway CR's configuration has no k8s_certificates extension")
	}
	sa, _, _ := unstructured.NestedString(gw.Object, "spec", "serviceAccount")
	if got := settings["owner_service_account"]; got != sa {
		t.Errorf("the gateway CR's owner_service_account %v, want its spec.serviceAccount %q", got, sa)
	}
	runCertificates(t, c, "flowtel", settings, sa, false)
	checkSecretVolumes(t, c, "deploy/operator", "flowtel", objs)
	checkHops(t, c, "flowtel", "flowtel")

	rules := func(file string) any {
		for _, o := range objects(t, readFile(t, file)) {
			if o.GetKind() == "Role" {
				r, _, _ := unstructured.NestedSlice(o.Object, "rules")
				return r
			}
		}
		t.Fatalf("%s: no Role", file)
		return nil
	}
	if a, b := rules("operator/rbac.yaml"), rules("kubernetes/base/gateway/role.yaml"); !reflect.DeepEqual(a, b) {
		t.Errorf("the Operator's certificates Role %v differs from the kustomize base's %v", a, b)
	}
}

// checkSecretVolumes: every Secret volume of the workloads exists, with the
// keys it mounts (all three of a certificate Secret, ca.crt of a CA Secret).
func checkSecretVolumes(t *testing.T, c cluster, what, namespace string, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, v := range secretVolumes(t, objs) {
		s, err := c.Admin.CoreV1().Secrets(namespace).Get(context.Background(), v.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: Secret volume %s: %v", what, v.SecretName, err)
			continue
		}
		want := []string{"tls.crt", "tls.key", "ca.crt"}
		if len(v.Items) > 0 {
			want = want[:0]
			for _, it := range v.Items {
				want = append(want, it.Key)
			}
		} else if len(s.Data) == 1 {
			want = []string{"ca.crt"} // a CA Secret: its certificate alone
		}
		for _, k := range want {
			if len(s.Data[k]) == 0 {
				t.Errorf("%s: Secret %s has no %s", what, v.SecretName, k)
			}
		}
	}
}

// shippedCertificates returns the k8s_certificates settings of the one
// collector the manifests run it in (the gateway; the flow stream fan-in runs
// the gateway distribution without it) and its Pods' ServiceAccount.
func shippedCertificates(t *testing.T, what string, objs []*unstructured.Unstructured) (map[string]any, string) {
	t.Helper()
	var (
		settings map[string]any
		sa       string
	)
	for _, c := range workloadCollectors(t, what, objs) {
		if c.dist != distributions.Gateway {
			continue
		}
		if s, ok := at(c.validate(t), "extensions", "k8s_certificates").(map[string]any); ok {
			if settings != nil {
				t.Fatalf("%s: two collectors run k8s_certificates", what)
			}
			settings, sa = s, c.pod.Spec.ServiceAccountName
		}
	}
	if settings == nil {
		t.Fatalf("%s: no collector runs k8s_certificates", what)
	}
	return settings, sa
}

// runCertificates starts and stops the k8s_certificates extension as the
// gateway's ServiceAccount sa, with the settings the deployment gives it
// (outside a Pod: the namespace and credentials given, no certificate files
// waited for), and checks that every Secret it manages belongs to sa. With
// upgrade it runs first as before owner_service_account, so the Secrets exist
// without owner and get it.
func runCertificates(t *testing.T, c cluster, namespace string, settings map[string]any, sa string, upgrade bool) {
	t.Helper()
	token := serviceAccountToken(t, c, namespace, sa)
	f := k8scertificatesextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*k8scertificatesextension.Config)
	if err := confmap.NewFromStringMap(settings).Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.AuthType, cfg.KubeConfig, cfg.Namespace = k8sclient.AuthKubeConfig, c.Kubeconfig(t, namespace+"-"+sa, token), namespace
	cfg.WaitForFiles = nil
	run := func(cfg *k8scertificatesextension.Config) {
		t.Helper()
		set := extensiontest.NewNopSettings(f.Type())
		set.Logger = zaptest.NewLogger(t)
		ext, err := f.Create(context.Background(), set, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		if err := ext.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
	if upgrade {
		earlier := *cfg
		earlier.OwnerServiceAccount = ""
		run(&earlier)
		for _, s := range managedSecrets(t, c, namespace) {
			if len(s.OwnerReferences) > 0 {
				t.Fatalf("Secret %s made without owner_service_account has owners %v: the upgrade proves nothing", s.Name, s.OwnerReferences)
			}
		}
	}
	run(cfg)

	owner, err := c.Admin.CoreV1().ServiceAccounts(namespace).Get(context.Background(), sa, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secrets := managedSecrets(t, c, namespace)
	if len(secrets) != 7 {
		t.Errorf("%d Secrets managed by the extension in %s, want 7", len(secrets), namespace)
	}
	for _, s := range secrets {
		refs := s.OwnerReferences
		if len(refs) != 1 || refs[0].APIVersion != "v1" || refs[0].Kind != "ServiceAccount" || refs[0].Name != sa || refs[0].UID != owner.UID ||
			(refs[0].Controller != nil && *refs[0].Controller) || refs[0].BlockOwnerDeletion == nil || *refs[0].BlockOwnerDeletion {
			t.Errorf("Secret %s/%s is owned by %+v, want ServiceAccount %s (UID %s) alone, no controller, blockOwnerDeletion false", namespace, s.Name, refs, sa, owner.UID)
		}
	}
}

// managedSecrets are the Secrets the k8s_certificates extension manages: its label.
func managedSecrets(t *testing.T, c cluster, namespace string) []corev1.Secret {
	t.Helper()
	list, err := c.Admin.CoreV1().Secrets(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=flowtel-k8s-certificates"})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// secretVolumes lists the Secret volumes of every workload's Pod template.
func secretVolumes(t *testing.T, objs []*unstructured.Unstructured) []*corev1.SecretVolumeSource {
	t.Helper()
	var out []*corev1.SecretVolumeSource
	for _, kind := range []string{"DaemonSet", "StatefulSet", "Deployment"} {
		for _, o := range find(objs, kind) {
			tmpl, ok, _ := unstructured.NestedMap(o.Object, "spec", "template")
			if !ok {
				t.Fatalf("%s %s: no Pod template", kind, o.GetName())
			}
			var pod corev1.PodTemplateSpec
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pod); err != nil {
				t.Fatal(err)
			}
			for _, v := range pod.Spec.Volumes {
				if v.Secret != nil {
					out = append(out, v.Secret)
				}
			}
		}
	}
	// The Operator's CRs hold the Pod's volumes in spec.volumes.
	for _, o := range find(objs, "OpenTelemetryCollector") {
		vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumes")
		for _, raw := range vols {
			var v corev1.Volume
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw.(map[string]any), &v); err != nil {
				t.Fatal(err)
			}
			if v.Secret != nil {
				out = append(out, v.Secret)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Secret volumes in the manifests")
	}
	return out
}

// checkHops verifies each certificate against the CA its peer requires, and
// not against the other hop's.
func checkHops(t *testing.T, c cluster, ns, prefix string) {
	t.Helper()
	get := func(name, key string) []byte {
		s, err := c.Admin.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Data[key]
	}
	cert := func(name string) *x509.Certificate {
		b, _ := pem.Decode(get(name, "tls.crt"))
		if b == nil {
			t.Fatalf("%s: no PEM certificate", name)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pool := func(name string) *x509.CertPool {
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(get(name, "ca.crt")) {
			t.Fatalf("%s: no ca.crt", name)
		}
		return p
	}
	gatewayCA, nodeCA := pool(prefix+"-gateway-ca"), pool(prefix+"-node-ca")
	for _, h := range []struct {
		secret, dns string
		usage       x509.ExtKeyUsage
		by, notBy   *x509.CertPool
	}{
		{prefix + "-gateway-tls", prefix + "-gateway." + ns + ".svc", x509.ExtKeyUsageServerAuth, gatewayCA, nodeCA},
		{prefix + "-gateway-tls", "", x509.ExtKeyUsageClientAuth, gatewayCA, nodeCA},
		{prefix + "-flowstream-tls", prefix + "-flowstream." + ns + ".svc", x509.ExtKeyUsageServerAuth, gatewayCA, nodeCA},
		{prefix + "-node-tls", "", x509.ExtKeyUsageClientAuth, nodeCA, gatewayCA},
	} {
		opts := x509.VerifyOptions{Roots: h.by, DNSName: h.dns, KeyUsages: []x509.ExtKeyUsage{h.usage}}
		if _, err := cert(h.secret).Verify(opts); err != nil {
			t.Errorf("%s (%v): %v", h.secret, h.usage, err)
		}
		opts.Roots = h.notBy
		if _, err := cert(h.secret).Verify(opts); err == nil {
			t.Errorf("%s verifies against the other hop's CA", h.secret)
		}
	}
}
