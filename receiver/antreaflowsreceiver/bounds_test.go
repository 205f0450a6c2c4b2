package antreaflowsreceiver

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTemplateFieldCountCheckedAgainstSet (issue 42.8): a 28-byte message
// whose template claims 65535 fields is refused as malformed without the
// decoder allocating for the fields it claims (it allocated about 1 MB).
func TestTemplateFieldCountCheckedAgainstSet(t *testing.T) {
	tmpl := be.AppendUint16(be.AppendUint16(nil, 256), 0xffff)
	tmpl = be.AppendUint16(be.AppendUint16(tmpl, 8), 4) // one field of the 65535 claimed
	msg := message(set(templateSetID, tmpl))
	require.Len(t, msg, 28)
	s := newSession(0)
	_, err := s.decode(msg, t0)
	require.ErrorIs(t, err, errMalformed)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		_, _ = s.decode(msg, t0)
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / runs
	assert.Less(t, perRun, uint64(4<<10), "bytes allocated per 28-byte message")
}
