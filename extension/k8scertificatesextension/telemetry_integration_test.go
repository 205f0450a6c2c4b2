//go:build integration

package k8scertificatesextension

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flowtel/flowtel/extension/k8scertificatesextension/internal/metadata"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

// TestChecksCounted: each check is counted by outcome and each Secret it
// writes by name: a first check on an empty namespace writes all seven, the
// next none; Secrets it did not make count not_ours; an API server that does
// not answer counts failed.
func TestChecksCounted(t *testing.T) {
	cp := controlplane.Start(t)
	defer controlplane.CloseIdleConnections(cp.Admin)
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	tb, err := metadata.NewTelemetryBuilder(tel.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	c := &certificates{logger: zaptest.NewLogger(t), tel: tb}
	ctx := context.Background()

	c.check(ctx, newProvisioner(t, cp, "counted", time.Now))
	c.check(ctx, newProvisioner(t, cp, "counted", time.Now))
	theirs := newProvisioner(t, cp, "theirs", time.Now)
	if _, err := cp.Admin.CoreV1().Secrets("theirs").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "flowtel-gateway-tls"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.check(ctx, theirs)
	down := newProvisioner(t, cp, "down", time.Now)
	down.client = kubernetes.NewForConfigOrDie(&rest.Config{Host: "https://127.0.0.1:1", Timeout: 2 * time.Second})
	c.check(ctx, down)

	checks := sums(t, tel, "otelcol_extension_k8s_certificates_checks", "outcome")
	if want := map[string]int64{"ok": 2, "not_ours": 1, "failed": 1}; !equalCounts(checks, want) {
		t.Errorf("checks by outcome %v, want %v", checks, want)
	}
	written := sums(t, tel, "otelcol_extension_k8s_certificates_secrets_written", "secret")
	want := map[string]int64{}
	for _, name := range newProvisioner(t, cp, "counted", time.Now).secretNames() {
		want[name] = 1
	}
	if len(want) != 7 || !equalCounts(written, want) {
		t.Errorf("Secrets written %v, want each of %d once", written, len(want))
	}
}

// sums is a counter's values by one attribute.
func sums(t *testing.T, tel *componenttest.Telemetry, name, key string) map[string]int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key(key))
		out[v.AsString()] += dp.Value
	}
	return out
}

func equalCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
