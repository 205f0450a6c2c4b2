//go:build !flowtel_safe

package attrcodec

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// throughAPI makes the reads of the test go through pdata's API.
func throughAPI(t testing.TB) {
	fast, types := readFast, [4]unsafe.Pointer{readStrType, readIntType, readBoolType, readMapType}
	readFast, readStrType, readIntType, readBoolType, readMapType = false, nil, nil, nil, nil
	t.Cleanup(func() {
		readFast = fast
		readStrType, readIntType, readBoolType, readMapType = types[0], types[1], types[2], types[3]
	})
}

// Records with attributes of every type in place of others decode alike
// through pdata's internals and its API.
func TestReadsMatchAPI(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		picks := make([]byte, rng.IntN(8))
		for i := range picks {
			picks[i] = byte(rng.Uint32())
		}
		decodesAsAPI(t, mutated(picks, rng.Int64N(1<<40)-1<<39, []string{"", "x", "10.0.0.1", "fd00::1%eth0", "TCP", "ESTABLISHED"}[rng.IntN(6)]))
	}
	for _, v := range variants(t, 3) {
		lr := plog.NewLogRecord()
		Encode(v, lr)
		decodesAsAPI(t, lr)
	}
}

// Reading a value from pdata's wrapper decodes it as the dec* functions do
// through pdata's API, or leaves it to them: for every attribute, its own
// value and values of other types and out of range.
func TestQuickDecodesAsAPI(t *testing.T) {
	lr := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), lr)
	quicks := 0
	for i := range attributes {
		a := &attributes[i]
		if a.derive != nil {
			continue
		}
		v, ok := lr.Attributes().Get(a.Name)
		require.True(t, ok, a.Name)
		for _, v := range []pcommon.Value{v, pcommon.NewValueStr("x"), pcommon.NewValueInt(-1), pcommon.NewValueInt(300), pcommon.NewValueDouble(1)} {
			var fast, api flowrecord.Record
			if quick(&a.ref, a.ref.At(&fast), v, new(spares)) {
				quicks++
			}
			errFast := put(a, a.ref.At(&fast), a.Name, v, new(spares))
			readFast = false
			errAPI := put(a, a.ref.At(&api), a.Name, v, new(spares))
			readFast = true
			assert.Equal(t, errAPI, errFast, a.Name)
			assert.Equal(t, api, fast, a.Name)
		}
	}
	assert.Positive(t, quicks)
}
