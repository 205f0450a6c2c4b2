//go:build integration

package dashboards_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/flowtel/flowtel/deploy/dashboards"
)

// configMap is what the tests read of a rendered ConfigMap.
type configMap struct {
	Namespace   string
	Labels      map[string]string
	Annotations map[string]string
	Data        map[string]string
}

// configMaps parses a multi-document manifest and returns its ConfigMaps by name.
func configMaps(t *testing.T, manifest []byte) map[string]configMap {
	t.Helper()
	out := map[string]configMap{}
	dec := yaml.NewDecoder(strings.NewReader(string(manifest)))
	for {
		var doc struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name        string            `yaml:"name"`
				Namespace   string            `yaml:"namespace"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Data map[string]string `yaml:"data"`
		}
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if doc.Kind == "ConfigMap" {
			out[doc.Metadata.Name] = configMap{doc.Metadata.Namespace, doc.Metadata.Labels, doc.Metadata.Annotations, doc.Data}
		}
	}
	return out
}

func command(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("%s %v: %v\n%s", name, args, err, ee.Stderr)
	}
	require.NoError(t, err)
	return out
}

// wantDashboards checks that cms hold every dashboard, as the source file,
// under name(file), labelled for Grafana's sidecar.
func wantDashboards(t *testing.T, cms map[string]configMap, namespace string, name func(file string) string) {
	t.Helper()
	for _, file := range dashboards.Names() {
		src, err := dashboards.Raw(file)
		require.NoError(t, err)
		cm, ok := cms[name(file)]
		if !assert.True(t, ok, "no ConfigMap %s", name(file)) {
			continue
		}
		assert.Equal(t, namespace, cm.Namespace)
		assert.Equal(t, "1", cm.Labels["grafana_dashboard"])
		assert.JSONEq(t, string(src), cm.Data[file], "%s: the dashboard differs from deploy/dashboards/%s", name(file), file)
	}
}

// TestHelmDashboards: with dashboards.enabled the chart renders one ConfigMap
// per dashboard, labelled for the sidecar; without, none.
func TestHelmDashboards(t *testing.T) {
	helm := strings.TrimSpace(string(command(t, "../helm/build-helm.sh")))
	chart := "../helm/flowtel"
	off := configMaps(t, command(t, helm, "template", "obs", chart, "--namespace", "monitoring"))
	for name := range off {
		assert.NotContains(t, name, "dashboard", "dashboards are off by default")
	}
	on := configMaps(t, command(t, helm, "template", "obs", chart, "--namespace", "monitoring",
		"--set", "dashboards.enabled=true", "--set", "dashboards.namespace=grafana", "--set", "dashboards.annotations.grafana_folder=flowtel"))
	wantDashboards(t, on, "grafana", func(file string) string {
		return "obs-flowtel-dashboard-" + strings.TrimPrefix(strings.TrimSuffix(file, ".json"), "flowtel-")
	})
	assert.Equal(t, "flowtel", on["obs-flowtel-dashboard-flows"].Annotations["grafana_folder"])
	command(t, helm, "lint", chart, "--set", "dashboards.enabled=true")
}

// TestKustomizeDashboards: an overlay of the base with the grafana-dashboards
// component holds one ConfigMap per dashboard (in no Namespace: the overlay's
// namespace, or kubectl's, applies).
func TestKustomizeDashboards(t *testing.T) {
	abs, err := filepath.Abs("../kubernetes")
	require.NoError(t, err)
	dir := t.TempDir()
	rel := func(p string) string { // kustomize refuses absolute paths
		r, err := filepath.Rel(dir, filepath.Join(abs, p))
		require.NoError(t, err)
		return r
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [`+rel("base")+`]
components: [`+rel("components/grafana-dashboards")+`]
`), 0o644))
	wantDashboards(t, configMaps(t, command(t, "kubectl", "kustomize", dir)), "", func(file string) string {
		return "flowtel-dashboard-" + strings.TrimPrefix(strings.TrimSuffix(file, ".json"), "flowtel-")
	})
}
