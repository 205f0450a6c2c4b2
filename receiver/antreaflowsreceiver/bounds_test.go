package antreaflowsreceiver

import (
	"net"
	"runtime"
	"testing"
	"time"

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

// TestTemplatesBounded (issue 42.8): templates are kept up to
// max_templates_per_session per session and max_templates over all; one
// over is refused and counted (template_limit), a template announced again
// replaces itself, and a session that ends gives its templates back.
func TestTemplatesBounded(t *testing.T) {
	lim := &templateLimits{perSession: 2, max: 3}
	a, b := newBoundedSession(0, lim), newBoundedSession(0, lim)
	res, err := a.decode(message(set(templateSetID, smallTemplateAs(256), smallTemplateAs(257), smallTemplateAs(258))), t0)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{reasonTemplateLimit: 1}, res.refused, "per session")
	assert.Len(t, a.templates, 2)
	res, err = a.decode(message(set(templateSetID, smallTemplateAs(256), smallTemplateAs(257))), t0)
	require.NoError(t, err)
	assert.Empty(t, res.refused, "announced again")
	res, err = b.decode(message(set(templateSetID, smallTemplateAs(256), smallTemplateAs(257))), t0)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{reasonTemplateLimit: 1}, res.refused, "in total")
	assert.Equal(t, int64(3), lim.total.Load())
	a.close()
	assert.Equal(t, int64(1), lim.total.Load())
	res, err = b.decode(message(set(templateSetID, smallTemplateAs(256), smallTemplateAs(257))), t0)
	require.NoError(t, err)
	assert.Empty(t, res.refused)
	_, err = b.decode(message(set(templateSetID, withdrawal(templateSetID))), t0)
	require.NoError(t, err)
	assert.Equal(t, int64(0), lim.total.Load(), "withdrawn")

	// Through the receiver: counted by reason.
	s := startReceiver(t, func(c *Config) { c.IPFIX.MaxTemplatesPerSession = 1 })
	conn, err := net.Dial("tcp", s.cfg.IPFIX.Endpoint)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write(message(set(templateSetID, smallTemplateAs(256), smallTemplateAs(257))))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return s.counter(t, "otelcol_receiver_antrea_flows_refused", "reason", reasonTemplateLimit) == 1
	}, 5*time.Second, 10*time.Millisecond)
}
