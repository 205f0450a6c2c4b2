//go:build flowtel_safe

package flowrecord

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// In the flowtel_safe build no fast path is taken: every other test of the
// package runs on pdata's public API alone.
func TestNoFastPath(t *testing.T) {
	require.False(t, readFast, "Decode reads pdata's internals")
	require.Nil(t, strWrapperType, "Encode writes pdata's string wrappers")
	require.Nil(t, intWrapperType, "Encode writes pdata's int wrappers")
	require.Equal(t, ^uintptr(0), pairsOffset, "Encode carves xpdata.MapBuilder's arrays")
}
