//go:build !flowtel_safe

package attrcodec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The pdata and xpdata this module pins have the layouts the fast paths
// expect. When an upgrade changes one, Encode and Decode fall back to
// pdata's API (correct, slower) and these tests fail, so that the change is
// seen: update encoder_fast.go or read_fast.go, or drop the fast path.

func TestEncoderUsesSlabs(t *testing.T) {
	require.NotNil(t, strWrapperType, "pdata's string wrapper layout changed: Encode allocates every value")
	require.NotNil(t, intWrapperType, "pdata's int wrapper layout changed: Encode allocates every value")
	require.NotEqual(t, ^uintptr(0), pairsOffset, "xpdata.MapBuilder's layout changed: Encode allocates every record's attribute array")
}

func TestReaderProbe(t *testing.T) {
	require.True(t, readFast, "read_fast.go's layout probe failed against this pdata version")
	require.True(t, probeReader())
}
