//go:build integration

package kube_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowtel/flowtel/testbed/kube"
)

// TestClusterRunsPods: two Nodes become Ready, Pods run on each, and a Pod on
// one reaches a Pod on the other through a Service found by its DNS name
// (CoreDNS, kube-proxy's NAT, the routes between podCIDRs).
func TestClusterRunsPods(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a cluster of real kubelets needs root; CI runs as root")
	}
	imgs, err := kube.Images()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c := kube.Start(t, kube.Options{Images: imgs.Tarballs})
	t.Logf("cluster up in %s", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	manifest := `
apiVersion: v1
kind: Pod
metadata: {name: server, labels: {app: server}}
spec:
  nodeName: node-2
  containers: [{name: peer, image: ` + kube.PeerImage + `, args: [serve, -listen, "0.0.0.0:8080"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: node-1
  containers: [{name: peer, image: ` + kube.PeerImage + `, args: [serve, -listen, "0.0.0.0:9000"]}]
---
apiVersion: v1
kind: Service
metadata: {name: server}
spec:
  selector: {app: server}
  ports: [{port: 80, targetPort: 8080}]
`
	f := t.TempDir() + "/pods.yaml"
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(ctx, "apply", "-f", f); err != nil {
		t.Fatal(err, out)
	}
	if out, err := c.Kubectl(ctx, "wait", "--for=condition=Ready", "pod/server", "pod/client", "--timeout=2m"); err != nil {
		events, _ := c.Kubectl(ctx, "get", "events", "-A")
		t.Fatalf("%v %s\n%s", err, out, events)
	}
	if err := c.WaitServiceRules(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	out, err := c.Kubectl(ctx, "exec", "client", "--", "/flowpeer", "send", "-proto", "tcp", "-to", "server.default.svc.cluster.local:80", "-bytes", "100", "-timeout", "20s")
	if err != nil {
		t.Fatal(err, out)
	}
	t.Log(strings.TrimSpace(out))
}
