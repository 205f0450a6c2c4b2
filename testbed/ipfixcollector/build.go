package ipfixcollector

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Version is the go-ipfix release whose collector is built: the one flowtel's
// exporter encodes with (v0.17.0 is also the newest the module proxy serves).
const Version = "v0.17.0"

// BinaryEnv names an environment variable that, when set, is the path of a
// collector binary built beforehand (CI builds it once for all packages).
const BinaryEnv = "FLOWTEL_IPFIX_COLLECTOR"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Build returns the path of the go-ipfix collector binary, building it on first
// use. The binary is cached in the user cache directory under the version's
// name, so test binaries of several packages (and later runs) share one build;
// it is written to a temporary name and renamed, so concurrent builders never
// see a partial file. A build failure fails the test.
func Build(t testing.TB) string {
	t.Helper()
	path, err := BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// BuildBinary is Build for callers outside a test: scripts/peers.sh builds the
// collector through it before any test runs, so no test deadline covers the
// one-time build.
func BuildBinary() (string, error) {
	buildOnce.Do(func() { buildPath, buildErr = build() })
	return buildPath, buildErr
}

func build() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinaryEnv, p, err)
		}
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "flowtel")
	bin := filepath.Join(dir, "go-ipfix-collector-"+Version)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o100 != 0 {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	mod, err := os.MkdirTemp("", "flowtel-ipfix-collector-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(mod)
	files := map[string]string{
		"go.mod":   "module ipfixcollectorbuild\n\ngo 1.26.0\n\nrequire github.com/vmware/go-ipfix " + Version + "\n",
		"tools.go": "//go:build tools\n\npackage tools\n\nimport _ \"github.com/vmware/go-ipfix/cmd/collector\"\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".go-ipfix-collector-%d", os.Getpid()))
	cmd := exec.Command("go", "build", "-o", tmp, "github.com/vmware/go-ipfix/cmd/collector")
	cmd.Dir = mod
	// -mod=mod lets go fill the throw-away module's go.sum; GOWORK=off keeps
	// any workspace of the caller out of it.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("building the go-ipfix %s collector: %v\n%s", Version, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return bin, nil
}
