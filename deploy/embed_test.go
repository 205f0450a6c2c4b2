//go:build integration

package deploy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/distributions"
)

// roleConfigs are the deployed roles: the distribution whose config.yaml is the
// role's one configuration, and the name of its copies under deploy/.
var roleConfigs = []struct{ dist, role string }{
	{distributions.Node, "node"},
	{distributions.Gateway, "gateway"},
}

// embedded is what a copy of a role's configuration holds: a line naming the
// source, then the source as it is.
func embedded(t *testing.T, dist string) []byte {
	t.Helper()
	src, err := os.ReadFile(distributions.Config(dist))
	require.NoError(t, err)
	header := "# GENERATED from distributions/" + dist + "/config.yaml (edit that file, then run\n" +
		"# FLOWTEL_UPDATE_GENERATED=1 go test -run TestConfigsEmbedded ./deploy).\n"
	return append([]byte(header), src...)
}

// operatorCR returns the Operator CR with its spec.config replaced by config:
// spec.config is the CR's last field, the source indented under it.
func operatorCR(t *testing.T, cr, config []byte) []byte {
	t.Helper()
	const key = "\n  config:\n"
	i := bytes.Index(cr, []byte(key))
	require.GreaterOrEqual(t, i, 0, "the CR has no spec.config")
	var out bytes.Buffer
	out.Write(cr[:i+len(key)])
	for _, line := range strings.SplitAfter(string(config), "\n") {
		if strings.TrimSpace(line) != "" {
			out.WriteString("    ")
		}
		out.WriteString(line)
	}
	return out.Bytes()
}

// The kustomize base, the Helm chart and the Operator CRs run the roles'
// configurations of distributions/, byte for byte: kustomize and Helm can only
// read files below their own directory, so they hold copies, and the Operator
// takes the configuration inside the CR. FLOWTEL_UPDATE_GENERATED=1 rewrites
// them; otherwise a copy that differs fails.
func TestConfigsEmbedded(t *testing.T) {
	update := os.Getenv("FLOWTEL_UPDATE_GENERATED") == "1"
	check := func(rel string, want []byte) {
		t.Helper()
		file := filepath.Join(deployDir(), rel)
		if update {
			require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
			require.NoError(t, os.WriteFile(file, want, 0o644))
		}
		assert.Equal(t, string(want), string(readFile(t, rel)),
			"deploy/%s differs from its source: run FLOWTEL_UPDATE_GENERATED=1 go test -run TestConfigsEmbedded ./deploy", rel)
	}
	for _, r := range roleConfigs {
		cfg := embedded(t, r.dist)
		check("kubernetes/base/config/"+r.role+".yaml", cfg)
		check("helm/flowtel/config/"+r.role+".yaml", cfg)
		cr := "operator/" + r.role + ".yaml"
		check(cr, operatorCR(t, readFile(t, cr), cfg))
	}
}
