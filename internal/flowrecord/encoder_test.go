package flowrecord

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
)

// The pdata this module pins has the layout the encoder expects: when an
// upgrade changes it, Encode falls back to SetStr/SetInt (correct, slower)
// and this test says so.
func TestEncoderUsesSlabs(t *testing.T) {
	require.NotNil(t, strWrapperType, "pdata's string wrapper layout changed: Encode allocates every value")
	require.NotNil(t, intWrapperType, "pdata's int wrapper layout changed: Encode allocates every value")
}

// withoutSlabs runs f with the encoder on pdata's Set* path.
func withoutSlabs(f func()) {
	s, i := strWrapperType, intWrapperType
	strWrapperType, intWrapperType = nil, nil
	defer func() { strWrapperType, intWrapperType = s, i }()
	f()
}

// Values written into slabs are the values SetStr/SetInt write, and stay
// independent: changing, removing or copying one leaves the others alone.
func TestEncodeSlabsEqualSetValues(t *testing.T) {
	for name, r := range map[string]*Record{"full": fullRecord(), "node": nodeRecord()} {
		t.Run(name, func(t *testing.T) {
			fast, slow := plog.NewLogRecord(), plog.NewLogRecord()
			Encode(r, fast)
			withoutSlabs(func() { Encode(r, slow) })
			require.Equal(t, slow.Attributes().AsRaw(), fast.Attributes().AsRaw())
			require.True(t, slow.Attributes().Equal(fast.Attributes()))

			copied := plog.NewLogRecord()
			fast.CopyTo(copied)
			want := copied.Attributes().AsRaw()
			v, _ := fast.Attributes().Get(AttrSourceAddress)
			v.SetStr("192.0.2.1")
			v, _ = fast.Attributes().Get(AttrProtocol)
			v.SetInt(17)
			fast.Attributes().Remove(AttrNetworkType)
			want[AttrSourceAddress], want[AttrProtocol] = "192.0.2.1", int64(17)
			delete(want, AttrNetworkType)
			require.Equal(t, want, fast.Attributes().AsRaw())
			require.Equal(t, slow.Attributes().AsRaw(), copied.Attributes().AsRaw())

			var back Record
			require.NoError(t, Decode(copied, &back))
		})
	}
}
