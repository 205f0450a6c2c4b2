//go:build integration

package e2ekube

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowtel/flowtel/testbed/kube"
	"github.com/flowtel/flowtel/testbed/kube/images"
)

// TestKubeInstalls installs flowtel every way the repository ships, one after
// the other on one cluster: the chart with each ci/*-values.yaml, two
// releases side by side, the Operator's CRs under its real manager, the
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
			before := b.clusterWide(t)
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
			b.requireNothingLeft(t, before, ns, "secret/clickhouse-credentials")
			b.kubectl(t, "delete", "namespace", ns, "--wait=false")
		})
	}

	t.Run("operator", func(t *testing.T) {
		b.startOperator(t)
		before := b.clusterWide(t)
		start := time.Now()
		for _, f := range []string{"rbac.yaml", "gateway.yaml", "node.yaml", "flowstream.yaml"} {
			b.kubectl(t, "apply", "-f", filepath.Join(root, "deploy/operator", f))
		}
		b.waitOperands(t, "flowtel", 3)
		t.Logf("the Operator's CRs: Ready in %s", time.Since(start).Round(time.Second))
		b.requireNoRestarts(t)
		for _, f := range []string{"flowstream.yaml", "node.yaml", "gateway.yaml", "rbac.yaml"} {
			b.kubectl(t, "delete", "-f", filepath.Join(root, "deploy/operator", f), "--wait=true", "--timeout=2m")
		}
		b.requireNothingLeft(t, before, "flowtel")
	})

	// Two releases of one name, in two Namespaces, on the same Nodes at once
	// (a second team's install, or a trial beside production): their
	// cluster-wide objects and their Nodes' storage directories are their
	// own, so both come up and neither restarts. The node collectors' ports
	// are the Nodes' (hostNetwork): the second release chooses its own, or the
	// scheduler keeps its Pods Pending ("didn't have free ports").
	t.Run("helm/two-releases", func(t *testing.T) {
		before := b.clusterWide(t)
		b.installFlowtel(t, "flowtel", "flowtel")
		b.installFlowtel(t, "flowtel", "flowtel-trial", "--set", "node.healthPort=13234", "--set", "node.metricsPort=18889")
		time.Sleep(10 * time.Second)
		b.requireNoRestarts(t)
		for _, ns := range []string{"flowtel", "flowtel-trial"} {
			b.helmRun(t, "uninstall", "flowtel", "-n", ns, "--wait", "--timeout", "2m")
		}
		for _, ns := range []string{"flowtel", "flowtel-trial"} {
			b.requireNothingLeft(t, before, ns)
			b.kubectl(t, "delete", "namespace", ns, "--wait=true", "--timeout=2m")
		}
	})

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
			before := b.clusterWide(t)
			start := time.Now()
			b.kubectl(t, "apply", "-k", dir)
			ns := b.namespaceOf(t, dir)
			if name == "antrea-flow-aggregator" {
				// The certificates Antrea's agents and the gateway exchange, made
				// as docs/deploy.md tells a user to.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if out, err := b.Run(ctx, "bash", filepath.Join(root, "deploy/antrea-certs.sh"), "--apply", "--namespace", ns); err != nil {
					t.Fatal(err, out)
				}
			}
			b.waitRollouts(t, ns)
			t.Logf("kubectl apply -k %s: Ready in %s", kustomizations[name], time.Since(start).Round(time.Second))
			b.requireNoRestarts(t)
			b.kubectl(t, "delete", "-k", dir, "--ignore-not-found", "--wait=true", "--timeout=2m")
			b.requireNothingLeft(t, before, ns)
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

// startOperator runs the OpenTelemetry Operator's manager (built from the
// release deploy/'s tests name) in the control plane's namespace, with its
// CRDs installed. Its webhooks are off: they would need a serving certificate
// the API server trusts and a Service in front of the manager.
func (b *bed) startOperator(t *testing.T) {
	t.Helper()
	dir, err := kube.OperatorDir()
	if err != nil {
		t.Fatal(err)
	}
	crds, _ := filepath.Glob(filepath.Join(dir, "config", "crd", "bases", "*.yaml"))
	for _, crd := range crds {
		b.kubectl(t, "apply", "--server-side", "-f", crd)
	}
	b.kubectl(t, "wait", "--for=condition=Established", "crd/opentelemetrycollectors.opentelemetry.io", "--timeout=1m")
	manager := filepath.Join(b.Bin, "opentelemetry-operator-"+strings.SplitN(kube.OperatorModule, "@", 2)[1])
	b.Start(t, "opentelemetry-operator", "/usr/bin/env", "KUBECONFIG="+b.Kubeconfig, manager,
		"--enable-webhooks=false", "--metrics-addr=127.0.0.1:18080", "--health-probe-addr=127.0.0.1:18081")
}

// waitOperands waits until the Operator made n workloads in namespace and each rolled out.
func (b *bed) waitOperands(t *testing.T, namespace string, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out := b.kubectl(t, "get", "daemonsets,statefulsets,deployments", "-n", namespace, "-o", "name")
		if len(strings.Fields(out)) >= n {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(b.Dir, "opentelemetry-operator.log"))
			if len(log) > 6000 {
				log = log[len(log)-6000:]
			}
			t.Fatalf("the Operator made %q of %d workloads in %s; its log:\n%s", out, n, namespace, log)
		}
		time.Sleep(time.Second)
	}
	b.waitRollouts(t, namespace)
}
