package k8sflowprocessor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README documents exactly the ClusterRole the integration test grants.
func TestREADMEClusterRole(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	role, err := os.ReadFile(filepath.Join("testdata", "clusterrole.yaml"))
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(readme), string(role)), "README.md must contain testdata/clusterrole.yaml verbatim")
}
