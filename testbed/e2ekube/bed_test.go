//go:build integration

// Package e2ekube runs flowtel as users run it: its own images on a real
// Kubernetes cluster (testbed/kube: kubelets, containerd, kube-proxy, CoreDNS),
// installed by its own chart, kustomize base and Operator CRs, with real Pods
// making the connections whose records must come out right in ClickHouse.
package e2ekube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/testbed/chserver"
	"github.com/flowtel/flowtel/testbed/kube"
	"github.com/flowtel/flowtel/testbed/kube/images"
)

// The bed's ClickHouse, as the Pods reach it (a relay in the control plane's
// namespace to the server on the test's loopback).
const (
	clickhouseAddr = "192.168.77.2:9000"
	database       = "flowtel_kube"
)

// bed is a cluster with a ClickHouse server the gateway can reach.
type bed struct {
	*kube.Cluster
	ch       *chserver.Server
	flowpeer string
	helm     string
	chart    string
}

func startBed(t *testing.T, proxyMode string) *bed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a cluster of real kubelets needs root; CI runs as root")
	}
	imgs, err := kube.Images()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c := kube.Start(t, kube.Options{ProxyMode: proxyMode, Images: imgs.Tarballs})
	t.Logf("bed: cluster of %d Nodes up in %s (kube-proxy %s mode)", len(c.Nodes), time.Since(start).Round(time.Second), proxyMode)
	ch := chserver.Start(t, chserver.Options{})
	stop, err := kube.Relay(c.ControlPlaneNS(), clickhouseAddr, ch.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	helm, err := exec.Command(filepath.Join(images.RepoRoot(), "deploy/helm/build-helm.sh")).Output()
	if err != nil {
		t.Fatalf("helm: %v", err)
	}
	return &bed{Cluster: c, ch: ch, flowpeer: imgs.Flowpeer, helm: strings.TrimSpace(string(helm)),
		chart: filepath.Join(images.RepoRoot(), "deploy/helm/flowtel")}
}

// kubectl runs kubectl and fails the test on error.
func (b *bed) kubectl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := b.Kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// helmRun runs helm and fails the test on error.
func (b *bed) helmRun(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := b.Run(ctx, b.helm, args...)
	if err != nil {
		b.dumpPods(t)
		t.Fatal(err)
	}
	return out
}

// apply applies manifests given as YAML text.
func (b *bed) apply(t testing.TB, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	b.kubectl(t, "apply", "-f", f)
}

// dumpPods logs every Pod's state and the logs of those not ready, for a failure.
func (b *bed) dumpPods(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	pods, err := b.Admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing Pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s/%s on %s: %s %s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, containerStates(p))
		if !podReady(&p) {
			out, _ := b.Kubectl(ctx, "logs", "-n", p.Namespace, p.Name, "--all-containers", "--tail=30")
			t.Logf("logs:\n%s", out)
		}
	}
	ev, _ := b.Kubectl(ctx, "get", "events", "-A", "--sort-by=.lastTimestamp")
	if len(ev) > 6000 {
		ev = ev[len(ev)-6000:]
	}
	t.Logf("events:\n%s", ev)
}

func containerStates(p corev1.Pod) string {
	var s []string
	for _, c := range p.Status.ContainerStatuses {
		st := "running"
		switch {
		case c.State.Waiting != nil:
			st = "waiting: " + c.State.Waiting.Reason + " " + c.State.Waiting.Message
		case c.State.Terminated != nil:
			st = "terminated: " + c.State.Terminated.Reason
		}
		s = append(s, fmt.Sprintf("%s(%s, restarts %d)", c.Name, st, c.RestartCount))
	}
	return strings.Join(s, " ")
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// requireNoRestarts fails if any container anywhere restarted.
func (b *bed) requireNoRestarts(t testing.TB) {
	t.Helper()
	pods, err := b.Admin.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if c.RestartCount != 0 {
				out, _ := b.Kubectl(context.Background(), "logs", "-n", p.Namespace, p.Name, "-c", c.Name, "--previous", "--tail=40")
				t.Errorf("%s/%s container %s restarted %d times; previous log:\n%s", p.Namespace, p.Name, c.Name, c.RestartCount, out)
			}
		}
	}
}

// clickhouse opens the bed's ClickHouse from the test process.
func (b *bed) clickhouse(t testing.TB) clickhouse.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
