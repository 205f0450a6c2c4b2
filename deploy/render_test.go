//go:build integration

package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
)

// deployDir is this directory, whatever the test's working directory.
func deployDir() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Dir(self)
}

func repoRoot() string { return filepath.Dir(deployDir()) }

// run runs a command and returns its standard output; a failure names the
// command and carries its standard error.
func run(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	out, err := runErr(stdin, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, errors.New(name + " " + strings.Join(args, " ") + ": " + err.Error() + ": " + stderr.String())
	}
	return out, nil
}

// kubectl is needed to render kustomize the way `kubectl apply -k` does.
func kubectl(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl is needed to render deploy/kubernetes (kubectl kustomize) and apply it: ", err)
	}
	return path
}

// kustomize renders a kustomization directory under deploy/kubernetes.
func kustomize(t testing.TB, dir string) []byte {
	t.Helper()
	return run(t, nil, kubectl(t), "kustomize", filepath.Join(deployDir(), "kubernetes", dir))
}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns the helm binary that deploy/helm/build-helm.sh builds from the
// Go module proxy (once per machine, cached).
func helm(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() {
		var out []byte
		out, helmErr = runErr(nil, filepath.Join(deployDir(), "helm", "build-helm.sh"))
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

func chartDir() string { return filepath.Join(deployDir(), "helm", "flowtel") }

// chartValueSets are the value files the chart is tested with ("" = defaults).
var chartValueSets = []string{"", "ci/all-sinks-mtls-values.yaml", "ci/dns-plaintext-values.yaml", "ci/no-client-auth-values.yaml"}

// helmTemplate renders the chart as `helm install` would.
func helmTemplate(t testing.TB, release, namespace, values string) []byte {
	t.Helper()
	args := []string{"template", release, chartDir(), "--namespace", namespace}
	if values != "" {
		args = append(args, "--values", filepath.Join(chartDir(), values))
	}
	return run(t, nil, helm(t), args...)
}

// readFile reads a file under deploy/.
func readFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// objects decodes a multi-document YAML stream into Kubernetes objects.
func objects(t testing.TB, manifests []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// find returns the objects of a kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}
