//go:build integration

package e2ekube

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowtel/flowtel/testbed/kube/images"
)

// TestKubeInstalls installs flowtel every way the repository ships, one after
// the other on one cluster: the chart with each ci/*-values.yaml, the
// kustomize base and each example that needs no service from outside. Each
// must come up (every Pod Ready, no restart) and go without a trace.
func TestKubeInstalls(t *testing.T) {
	b := startBed(t, "iptables")
	root := images.RepoRoot()

	values, err := filepath.Glob(filepath.Join(b.chart, "ci", "*-values.yaml"))
	if err != nil || len(values) == 0 {
		t.Fatalf("no ci values in %s (%v)", b.chart, err)
	}
	for _, v := range values {
		name := strings.TrimSuffix(filepath.Base(v), "-values.yaml")
		t.Run("helm/"+name, func(t *testing.T) {
			ns := "ci-" + name
			// What a values file names but the chart does not make: the
			// ClickHouse credentials of all-sinks-mtls.
			b.kubectl(t, "create", "namespace", ns)
			b.kubectl(t, "create", "secret", "generic", "clickhouse-credentials", "-n", ns,
				"--from-literal=username=flowtel", "--from-literal=password=secret")
			start := time.Now()
			b.helmRun(t, "install", "flowtel", b.chart, "-n", ns, "-f", v, "--wait", "--timeout", "4m")
			t.Logf("helm install -f %s --wait: %s", filepath.Base(v), time.Since(start).Round(time.Second))
			b.requireNoRestarts(t)
			b.helmRun(t, "uninstall", "flowtel", "-n", ns, "--wait", "--timeout", "2m")
			b.requireNothingLeft(t, "flowtel", ns, "secret/clickhouse-credentials")
			b.kubectl(t, "delete", "namespace", ns, "--wait=false")
		})
	}

	kustomizations := map[string]string{
		"base":                   "deploy/kubernetes/base",
		"antrea-flow-aggregator": "deploy/kubernetes/examples/antrea-flow-aggregator",
		"flow-stream":            "deploy/kubernetes/examples/flow-stream",
		"no-client-auth":         "deploy/kubernetes/examples/no-client-auth",
		"other-namespace":        "deploy/kubernetes/examples/other-namespace",
	}
	for _, name := range []string{"base", "antrea-flow-aggregator", "flow-stream", "no-client-auth", "other-namespace"} {
		t.Run("kustomize/"+name, func(t *testing.T) {
			dir := filepath.Join(root, kustomizations[name])
			start := time.Now()
			b.kubectl(t, "apply", "-k", dir)
			ns := b.namespaceOf(t, dir)
			b.waitRollouts(t, ns)
			t.Logf("kubectl apply -k %s: Ready in %s", kustomizations[name], time.Since(start).Round(time.Second))
			b.requireNoRestarts(t)
			b.kubectl(t, "delete", "-k", dir, "--wait=true", "--timeout=2m")
			b.requireNothingLeft(t, "flowtel", ns)
		})
	}
}

// namespaceOf is the Namespace a kustomization's workloads land in.
func (b *bed) namespaceOf(t *testing.T, dir string) string {
	t.Helper()
	out := b.kubectl(t, "kustomize", dir)
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.Contains(doc, "\nkind: DaemonSet\n") || strings.Contains(doc, "\nkind: StatefulSet\n") || strings.Contains(doc, "\nkind: Deployment\n") {
			for _, l := range strings.Split(doc, "\n") {
				if ns, ok := strings.CutPrefix(l, "  namespace: "); ok {
					return strings.TrimSpace(ns)
				}
			}
		}
	}
	t.Fatalf("no workload Namespace in %s", dir)
	return ""
}

// waitRollouts waits until every DaemonSet, StatefulSet and Deployment in
// namespace has rolled out.
func (b *bed) waitRollouts(t *testing.T, namespace string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := b.kubectl(t, "get", "daemonsets,statefulsets,deployments", "-n", namespace, "-o", "name")
	for _, w := range strings.Fields(out) {
		if o, err := b.Kubectl(ctx, "rollout", "status", "-n", namespace, w, "--timeout=4m"); err != nil {
			b.dumpPods(t)
			t.Fatalf("%s: %v %s", w, err, o)
		}
	}
}
