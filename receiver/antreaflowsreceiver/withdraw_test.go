package antreaflowsreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withdrawal is a template withdrawal record (RFC 7011 §8.1): the template
// ID and a field count of 0. Template ID 2 in a template set withdraws all
// the templates of the observation domain.
func withdrawal(id uint16) []byte { return be.AppendUint16(be.AppendUint16(nil, id), 0) }

// smallTemplateAs is smallTemplate under another template ID.
func smallTemplateAs(id uint16) []byte {
	b := smallTemplate()
	be.PutUint16(b, id)
	return b
}

// TestTemplateWithdrawal (issue 42.9): a withdrawal of one template forgets
// that one; the withdrawal of all templates (template ID 2, RFC 7011 §8.1)
// is a well-formed message that forgets every template of its observation
// domain, and the data sets of withdrawn templates are refused as unknown
// until they are announced again; other domains' templates stay.
func TestTemplateWithdrawal(t *testing.T) {
	s := newSession(0)
	dec := func(msg []byte) messageResult {
		t.Helper()
		res, err := s.decode(msg, t0)
		require.NoError(t, err)
		return res
	}
	other := message(set(templateSetID, smallTemplate()))
	be.PutUint32(other[12:], fnv1("node-b"))
	dec(other)
	dec(message(set(templateSetID, smallTemplate(), smallTemplateAs(257))))
	assert.Len(t, dec(message(set(256, smallRecord(1, "node-a")), set(257, smallRecord(2, "node-a")))).records, 2)

	dec(message(set(templateSetID, withdrawal(257))))
	res := dec(message(set(256, smallRecord(3, "node-a")), set(257, smallRecord(4, "node-a"))))
	assert.Len(t, res.records, 1)
	assert.Equal(t, map[string]int{reasonUnknownTemplate: 1}, res.refused)

	res, err := s.decode(message(set(templateSetID, withdrawal(templateSetID))), t0)
	require.NoError(t, err, "withdraw-all is well formed")
	assert.Empty(t, res.refused)
	res = dec(message(set(256, smallRecord(5, "node-a"))))
	assert.Empty(t, res.records)
	assert.Equal(t, map[string]int{reasonUnknownTemplate: 1}, res.refused, "withdrawn with all the domain's templates")

	// node-b's template is another domain's: kept.
	fromB := message(set(256, smallRecord(6, "node-b")))
	be.PutUint32(fromB[12:], fnv1("node-b"))
	assert.Len(t, dec(fromB).records, 1)

	// Withdraw-all and a new template in one message: the new one is kept.
	dec(message(set(templateSetID, withdrawal(templateSetID), smallTemplate())))
	assert.Len(t, dec(message(set(256, smallRecord(7, "node-a")))).records, 1)

	// Other IDs below 256 are still malformed.
	_, err = s.decode(message(set(templateSetID, withdrawal(5))), t0)
	assert.ErrorIs(t, err, errMalformed)
}
