//go:build integration

package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// The kustomize components that add a --config to the gateway stack in any
// order: each one's file is still read with all the others in the overlay (a
// component that lists the whole args would drop the others').
func TestComponentsStack(t *testing.T) {
	adds := map[string]string{ // component -> the --config it adds to the gateway
		"antrea-flow-aggregator": "--config=/etc/flowtel/antrea-config/antrea.yaml",
		"clickhouse":             "--config=/etc/flowtel/config/clickhouse.yaml",
		"flow-stream":            "--config=/etc/flowtel/flowstream/flowstream.yaml",
	}
	names := []string{"antrea-flow-aggregator", "clickhouse", "flow-stream"}
	for _, order := range [][]string{names, {names[2], names[1], names[0]}} {
		t.Run(strings.Join(order, "+"), func(t *testing.T) {
			args := gatewayArgs(t, stackedOverlay(t, order))
			for _, c := range order {
				if !slices.Contains(args, adds[c]) {
					t.Errorf("component %s's %s is lost: gateway args %v", c, adds[c], args)
				}
			}
			for _, base := range []string{"--config=/etc/flowtel/config/config.yaml", "--config=/etc/flowtel/config/certificates.yaml"} {
				if n := countOf(args, base); n != 1 {
					t.Errorf("%s %d times in %v", base, n, args)
				}
			}
		})
	}
}

// stackedOverlay renders an overlay of the base with the components, in that
// order. kustomize takes only relative paths below a kustomization, so the
// overlay lives (briefly) in deploy/kubernetes.
func stackedOverlay(t *testing.T, components []string) []byte {
	t.Helper()
	dir, err := os.MkdirTemp(filepath.Join(deployDir(), "kubernetes"), ".test-stack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../base]\ncomponents:\n"
	for _, c := range components {
		k += "  - ../components/" + c + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomize(t, filepath.Base(dir))
}

// gatewayArgs is the gateway StatefulSet's collector arguments.
func gatewayArgs(t *testing.T, manifests []byte) []string {
	t.Helper()
	for _, o := range find(objects(t, manifests), "StatefulSet") {
		var ss appsv1.StatefulSet
		convert(t, o, &ss)
		if ss.Name == "flowtel-gateway" {
			return containerNamed(t, "gateway", ss.Spec.Template.Spec.Containers, "collector").Args
		}
	}
	t.Fatal("no StatefulSet flowtel-gateway")
	return nil
}

func countOf(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}
