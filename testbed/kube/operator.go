package kube

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
)

// OperatorModule is the OpenTelemetry Operator release flowtel's Operator CRs
// are tested with: deploy/'s tests install its OpenTelemetryCollector CRD,
// and build.sh builds its manager for the cluster tests. scripts/peers.sh and
// build.sh read this line.
const OperatorModule = "github.com/open-telemetry/opentelemetry-operator@v0.141.0"

// OperatorDir returns the Operator module's directory in the module cache
// (downloading it if needed; its config/crd/bases holds the published CRDs).
// The module never enters flowtel's go.mod.
func OperatorDir() (string, error) {
	tmp, err := os.MkdirTemp("", "flowtel-operator-mod-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "mod", "download", "-json", OperatorModule)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s (for the Operator's CRDs): %w\n%s", OperatorModule, err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no module directory in %s", OperatorModule, out)
	}
	return mod.Dir, nil
}
