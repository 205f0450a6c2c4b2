//go:build !flowtel_safe

package compactcodec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// Peek reads a body where pdata holds it: pdata's ByteSlice has the layout
// bodyView expects (when it no longer has, this fails, and Peek copies each
// body), and the view is the body's own bytes.
func TestBodyView(t *testing.T) {
	require.True(t, viewable, "pcommon.ByteSlice is not laid out as byteSliceLayout: Peek copies every body")
	lr := plog.NewLogRecord()
	Encode(flowrecordtest.NodeHalf(), lr)
	b := lr.Body().Bytes()
	v := bodyView(b)
	require.Equal(t, string(b.AsRaw()), v)
	b.SetAt(0, b.At(0)+1)
	assert.Equal(t, string(b.AsRaw()), v, "the view shares the body's bytes")
}

// Without the view (pdata laid out otherwise), Peek copies the body and
// reads as Decode still.
func TestPeekWithoutView(t *testing.T) {
	viewable = false
	t.Cleanup(func() { viewable = probeView() })
	lr := plog.NewLogRecord()
	for _, r := range flowrecordtest.Records() {
		Encode(r, lr)
		samePeek(t, lr, Select(bodyFields()...), "every field, copied")
		samePeek(t, lr, Select(), "no field, copied")
	}
}
