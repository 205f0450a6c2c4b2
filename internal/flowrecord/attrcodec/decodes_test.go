package attrcodec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// decodesAsAPI checks that lr decodes alike through pdata's internals and
// through its API, with Decode and with a Decoder that decoded a full record
// before.
func decodesAsAPI(t *testing.T, lr plog.LogRecord) {
	t.Helper()
	type result struct {
		r   flowrecord.Record
		err string
	}
	decode := func() (results [2]result) {
		full := plog.NewLogRecord()
		Encode(flowrecordtest.EveryField(), full)
		var d Decoder
		require.NoError(t, d.Decode(full, &results[1].r))
		for i, f := range []func(plog.LogRecord, *flowrecord.Record) error{Decode, d.Decode} {
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
