//go:build integration

package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/distributions"
	bedcollector "github.com/flowtel/flowtel/testbed/collector"
)

var kubeletVarRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// hostStorageDir is the directory on the Node where a node collector's
// file_storage keeps its files: the hostPath of the volume the configured
// directory is mounted from, the mount's subPath (subPathExpr expanded, as
// the kubelet does, from the container's environment) and the rest of the
// directory below the mount.
func hostStorageDir(t *testing.T, c collector) string {
	t.Helper()
	raw := c.validate(t)
	if raw == nil {
		t.FailNow()
	}
	dir, _ := at(raw, "extensions", "file_storage", "directory").(string)
	m, vol := mountOf(c.mounts, c.volumes, dir)
	if vol == nil || vol.HostPath == nil {
		t.Fatalf("%s: file_storage directory %q is not on a hostPath volume", c.source, dir)
	}
	sub := m.SubPath
	if m.SubPathExpr != "" {
		sub = kubeletVarRef.ReplaceAllStringFunc(m.SubPathExpr, func(ref string) string {
			name := kubeletVarRef.FindStringSubmatch(ref)[1]
			v, ok := c.env[name]
			if !ok || v == "" {
				t.Fatalf("%s: subPathExpr %q uses $(%s), which the container does not set", c.source, m.SubPathExpr, name)
			}
			return v
		})
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(dir, m.MountPath), "/")
	return path.Join(vol.HostPath.Path, sub, rel)
}

// nodeCollector is the node collector of a rendered install.
func nodeCollector(t *testing.T, source string, manifests []byte) collector {
	t.Helper()
	for _, c := range workloadCollectors(t, source, objects(t, manifests)) {
		if c.dist == distributions.Node {
			return c
		}
	}
	t.Fatalf("%s: no node collector", source)
	return collector{}
}

// Two installs on one cluster never share a storage directory on a Node (two
// collectors cannot: each locks its files, and the second does not start).
// Helm releases, in one namespace or two, get /var/lib/flowtel/<namespace>/
// <release>; kustomize and the Operator CR /var/lib/flowtel/<namespace>/
// flowtel through subPathExpr; node.storageHostPath sets the directory.
func TestInstallsHaveTheirOwnStorageDirectory(t *testing.T) {
	helmWith := func(release, namespace string, set ...string) []byte {
		args := []string{"template", release, chartDir(), "--namespace", namespace}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		return run(t, nil, helm(t), args...)
	}
	nodeCR, _ := operatorCRs(t)
	installs := []struct {
		name string
		c    collector
		want string
	}{
		{"helm flowtel in flowtel", nodeCollector(t, "helm flowtel/flowtel", helmWith("flowtel", "flowtel")), "/var/lib/flowtel/flowtel/flowtel"},
		{"helm lab in flowtel", nodeCollector(t, "helm flowtel/lab", helmWith("lab", "flowtel")), "/var/lib/flowtel/flowtel/lab"},
		{"helm flowtel in obs", nodeCollector(t, "helm obs/flowtel", helmWith("flowtel", "obs")), "/var/lib/flowtel/obs/flowtel"},
		{"kustomize base", nodeCollector(t, "kustomize", kustomize(t, ".")), "/var/lib/flowtel/flowtel/flowtel"},
		{"kustomize other-namespace", nodeCollector(t, "kustomize other-namespace", kustomize(t, "examples/other-namespace")), "/var/lib/flowtel/netflows/flowtel"},
		{"operator", operatorCollector(t, "operator", nodeCR), "/var/lib/flowtel/flowtel/flowtel"},
	}
	for _, in := range installs {
		if got := hostStorageDir(t, in.c); got != in.want {
			t.Errorf("%s: storage directory on the Node %s, want %s", in.name, got, in.want)
		}
	}
	// Beside each other: two releases, a release and a kustomize install in
	// another namespace. (The kustomize base, the Operator CRs and a release
	// named flowtel in namespace flowtel are one install each way: they
	// create the same objects.)
	pairs := [][2]int{{0, 1}, {0, 2}, {1, 2}, {1, 3}, {2, 3}, {0, 4}, {3, 4}, {2, 5}}
	for _, p := range pairs {
		a, b := installs[p[0]], installs[p[1]]
		if da, db := hostStorageDir(t, a.c), hostStorageDir(t, b.c); da == db || strings.HasPrefix(db, da+"/") || strings.HasPrefix(da, db+"/") {
			t.Errorf("%s and %s share the storage directory %s / %s", a.name, b.name, da, db)
		}
	}

	if got := hostStorageDir(t, nodeCollector(t, "helm --set node.storageHostPath", helmWith("lab", "obs", "node.storageHostPath=/data/flowtel"))); got != "/data/flowtel" {
		t.Errorf("node.storageHostPath=/data/flowtel: storage directory %s", got)
	}
}

// Two built node collectors on one storage directory, as two installs that
// share a host directory are: the second does not start, and says why in
// terms a user can act on: the file, the process holding it (here visible:
// its PID and command line) and that each needs a directory of its own. It
// used to stop with `failed to start "load_balancing" exporter: timeout`.
// (Needs `make build`.)
func TestTwoNodeCollectorsOnOneDirectory(t *testing.T) {
	bin, err := bedcollector.Binary(repoRoot(), distributions.Node)
	require.NoError(t, err)
	dir, storage := t.TempDir(), t.TempDir()
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("token"), 0o600))
	start := func(name string) (*bedcollector.Process, error) {
		otlp, health, metrics := freePort(t), freePort(t), freePort(t)
		// The shipped configuration with its storage, on loopback: an otlp
		// receiver instead of conntrack and k8s_flow (no kernel table or API
		// server needed to start), a static resolver, no TLS.
		overlay := fmt.Sprintf(`
extensions:
  health_check: {endpoint: "127.0.0.1:%d"}
receivers:
  otlp: {protocols: {grpc: {endpoint: "127.0.0.1:%d"}}}
exporters:
  load_balancing:
    protocol: {otlp: {tls: {insecure: true}}}
    resolver: {k8s: {enabled: false}, static: {hostnames: ["127.0.0.1:%d"]}}
service:
  telemetry:
    metrics:
      readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]
  pipelines:
    logs: {receivers: [otlp], processors: [memory_limiter]}
`, health, otlp, freePort(t), metrics)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p, err := bedcollector.Start(ctx, bedcollector.Options{Name: name, Binary: bin, Dir: dir,
			Configs: []string{distributions.Config(distributions.Node)}, Config: overlay,
			Env: []string{"FLOWTEL_STORAGE_DIR=" + storage, "FLOWTEL_NODE_TOKEN_FILE=" + token, "K8S_NODE_NAME=node-1",
				"POD_NAMESPACE=flowtel-" + name, "K8S_POD_NAME=" + name + "-node-x7k2p"},
			HealthPort: health, MetricsPort: metrics})
		if err == nil {
			t.Cleanup(func() { _ = p.Stop() })
		}
		return p, err
	}
	first, err := start("a")
	require.NoError(t, err)
	_, err = start("b")
	require.Error(t, err, "a second collector started on the first one's storage directory")
	msg := err.Error()
	for _, want := range []string{
		`failed to start "load_balancing" exporter: directory: another process holds the lock on the storage file ` + filepath.Join(storage, "exporter_load_balancing__logs"),
		fmt.Sprintf(`pid %d ("%s --config`, first.Pid(), bin),
		"Pod flowtel-a/a-node-x7k2p",
		"give each its own",
	} {
		require.Contains(t, msg, want)
	}
}
