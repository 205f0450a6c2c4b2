package configtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// Enum checks that every value is in the enum of the attribute of the
// component's metadata.yaml: what the code records is what documentation.md
// (generated from that enum) lists.
func Enum(t *testing.T, attribute string, values ...string) {
	t.Helper()
	cm, err := confmaptest.LoadConf("metadata.yaml")
	require.NoError(t, err)
	raw, _ := cm.Get("attributes::" + attribute + "::enum").([]any)
	require.NotEmpty(t, raw, "metadata.yaml: attribute %s has no enum", attribute)
	enum := make([]string, len(raw))
	for i, v := range raw {
		enum[i], _ = v.(string)
	}
	for _, v := range values {
		assert.Contains(t, enum, v, "metadata.yaml: the enum of %s lacks a value the code records", attribute)
	}
}
