// Package gencheck keeps generated files and generated parts of documents
// equal to what the code generates: a test compares them and, when asked to
// through an environment variable, rewrites them.
package gencheck

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// File compares the file at path with got; FLOWTEL_UPDATE_GOLDEN=1 rewrites
// it instead. hint says how to rewrite it.
func File(t testing.TB, path, got, hint string) {
	t.Helper()
	if os.Getenv("FLOWTEL_UPDATE_GOLDEN") == "1" {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), got, "%s is stale: %s", path, hint)
}

// Section compares the part of the document at path between the lines begin
// and end (each with its newline) with got; FLOWTEL_UPDATE_DOCS=1 rewrites it
// instead. hint says how to rewrite it.
func Section(t testing.TB, path, begin, end, got, hint string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	require.True(t, i >= 0 && j > i, "%s lacks the generated-section markers %q and %q", path, begin, end)
	want := doc[:i+len(begin)] + got + doc[j:]
	if os.Getenv("FLOWTEL_UPDATE_DOCS") == "1" {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	assert.Equal(t, want, doc, "%s is stale: %s", path, hint)
}
