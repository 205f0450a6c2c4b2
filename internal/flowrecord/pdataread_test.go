package flowrecord

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
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

// decodesAsAPI checks that lr decodes alike through pdata's internals and
// through its API, with Decode and with a Decoder that decoded a full record
// before.
func decodesAsAPI(t *testing.T, lr plog.LogRecord) {
	t.Helper()
	type result struct {
		r   Record
		err string
	}
	decode := func() (results [2]result) {
		full := plog.NewLogRecord()
		Encode(fullRecord(), full)
		var d Decoder
		require.NoError(t, d.Decode(full, &results[1].r))
		for i, f := range []func(plog.LogRecord, *Record) error{Decode, d.Decode} {
			if err := f(lr, &results[i].r); err != nil {
				results[i].err = err.Error()
			}
		}
		return results
	}
	fast := decode()
	t.Run("api", func(t *testing.T) {
		throughAPI(t)
		assert.Equal(t, fast, decode())
	})
	if fast[0].err == "" {
		assert.Equal(t, fast[0].r, fast[1].r, "a Decoder decodes as Decode")
	}
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

// Every attribute Decode reads has a store, but those decoded by dec; a
// store decodes as dec does.
func TestStores(t *testing.T) {
	lr := plog.NewLogRecord()
	Encode(fullRecord(), lr)
	var withDec []string
	for i := range attributes {
		a := &attributes[i]
		if a.dec == nil {
			continue
		}
		if a.store.kind == storeFunc {
			withDec = append(withDec, a.Name)
			continue
		}
		v, ok := lr.Attributes().Get(a.Name)
		require.True(t, ok, a.Name)
		for _, v := range []pcommon.Value{v, pcommon.NewValueStr("x"), pcommon.NewValueInt(-1), pcommon.NewValueInt(300), pcommon.NewValueDouble(1)} {
			var byStore, byDec Record
			errStore, errDec := a.store.put(a.store.at(&byStore), a.Name, v, new(spares)), a.dec(&byDec, a.Name, v, nil)
			assert.Equal(t, errDec, errStore, a.Name)
			assert.Equal(t, byDec, byStore, a.Name)
		}
	}
	assert.ElementsMatch(t, []string{AttrNetworkTransport, "source.k8s.pod.labels", "destination.k8s.pod.labels", "flow.conntrack.labels"}, withDec)
}
