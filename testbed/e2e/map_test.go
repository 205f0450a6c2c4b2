//go:build integration

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeMap draws the scenario's flows with `flowctl map` (the binary `make
// build` writes) from the bed's ClickHouse over HTTP: DOT, and SVG when
// Graphviz's dot is installed, into dir (absolute paths returned). It checks the map holds the
// scenario's Pods, Nodes and external peer, and marks the refused edge.
func (b *bed) writeMap(t *testing.T, dir string) (dot, svg string) {
	t.Helper()
	flowctl, err := filepath.Abs(filepath.Join(repoRoot, "_build", "flowctl", "flowctl"))
	require.NoError(t, err)
	_, err = os.Stat(flowctl)
	require.NoError(t, err, "flowctl is not built (run `make build`)")
	dir, err = filepath.Abs(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	run := func(out string) {
		cmd := exec.Command(flowctl, "map", "--clickhouse", fmt.Sprintf("http://127.0.0.1:%d", b.ch.HTTPPort),
			"--database", "flowtel_e2e", "--since", "1h", "-o", out)
		msg, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", msg)
	}
	dot = filepath.Join(dir, "flows-map.dot")
	run(dot)
	got, err := os.ReadFile(dot)
	require.NoError(t, err)
	for _, id := range []string{"pod/default/client-a", "pod/default/web-a", "pod/default/web-b", "pod/default/web-c", "node/node-1", "external/"} {
		assert.Contains(t, string(got), `"`+id, "the map has no %s", id)
	}
	assert.Contains(t, string(got), `subgraph "cluster_default"`)
	// client-a → web-b: the refused connection and its IPv6 twin.
	refused := regexp.MustCompile(`"pod/default/client-a" -> "pod/default/web-b" \[[^\]]*outcome=refused, connections=2,`)
	assert.Regexp(t, refused, string(got), "the refused edge is not marked")
	if _, err := exec.LookPath("dot"); err == nil {
		svg = filepath.Join(dir, "flows-map.svg")
		run(svg)
	}
	return dot, svg
}
