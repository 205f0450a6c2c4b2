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

// certificatesFile is the kustomize base's second gateway configuration,
// which turns the k8s_certificates extension on.
const certificatesFile = "kubernetes/base/config/certificates.yaml"

// withCertificates is the gateway configuration with certificates.yaml merged
// in, for the Operator CR: the Operator gives a collector one configuration
// file, so the extension goes into it (under extensions, and in
// service.extensions as certificates.yaml lists them).
func withCertificates(t *testing.T, gateway []byte) []byte {
	t.Helper()
	certs := string(readFile(t, certificatesFile))
	_, rest, ok := strings.Cut(certs, "\nextensions:\n")
	require.True(t, ok, "%s: no extensions section", certificatesFile)
	ext, svc, ok := strings.Cut(rest, "service:\n")
	require.True(t, ok, "%s: no service section", certificatesFile)
	lines := strings.Split(strings.TrimRight(svc, "\n"), "\n")
	list := lines[len(lines)-1]
	require.True(t, strings.HasPrefix(list, "  extensions: ["), "%s: service.extensions is not its last line", certificatesFile)
	out := string(gateway)
	const top = "\nextensions:\n"
	require.Contains(t, out, top)
	out = strings.Replace(out, top, top+"  # From deploy/"+certificatesFile+": the gateway makes and renews the certificates.\n"+ext, 1)
	const shipped = "\n  extensions: [health_check, server_tls]\n"
	require.Contains(t, out, shipped, "the gateway configuration's service.extensions changed: update withCertificates")
	out = strings.Replace(out, shipped, "\n"+list+"\n", 1)
	header := "# GENERATED from distributions/flowtel-gateway/config.yaml and deploy/" + certificatesFile + "\n" +
		"# (edit those files, then run FLOWTEL_UPDATE_GENERATED=1 go test -run TestConfigsEmbedded ./deploy).\n"
	_, body, _ := strings.Cut(out, "\n") // embedded()'s header: two lines
	_, body, _ = strings.Cut(body, "\n")
	return []byte(header + body)
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
		if r.dist == distributions.Gateway {
			cfg = withCertificates(t, cfg)
		}
		check(cr, operatorCR(t, readFile(t, cr), cfg))
	}
}
