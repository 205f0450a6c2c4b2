//go:build integration

package flowstreampb

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeneratedCodeIsCurrent regenerates this package with protoc and the
// pinned plugins and fails when the committed code differs (run
// proto/generate.sh and commit).
func TestGeneratedCodeIsCurrent(t *testing.T) {
	_, err := exec.LookPath("protoc")
	require.NoError(t, err, "protoc: not found; install it with scripts/deps.sh (Debian protobuf-compiler)")
	out := t.TempDir()
	cmd := exec.Command(filepath.Join("proto", "generate.sh"), out)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	want, err := filepath.Glob("*.pb.go")
	require.NoError(t, err)
	got, err := filepath.Glob(filepath.Join(out, "*.go"))
	require.NoError(t, err)
	require.Len(t, got, len(want), "generated files differ from api/flowstreampb/")
	for _, w := range want {
		committed, err := os.ReadFile(w)
		require.NoError(t, err)
		fresh, err := os.ReadFile(filepath.Join(out, filepath.Base(w)))
		require.NoError(t, err)
		require.Equal(t, string(fresh), string(committed), "%s is stale: run api/flowstreampb/proto/generate.sh and commit", w)
	}
}
