package antreaflowsreceiver

import (
	"testing"
)

// FuzzDecodeMessage feeds the IPFIX message decoder arbitrary bytes after a
// well-formed template message: it must never panic, and a message it does
// not refuse whole yields only records of announced templates with their
// observation domain and export time set.
func FuzzDecodeMessage(f *testing.F) {
	tmpl := message(set(templateSetID, smallTemplate()))
	f.Add(message(set(256, smallRecord(1, "node-a"))))
	f.Add(message(set(256, smallRecord(1, "node-a"), smallRecord(2, ""))))
	f.Add(message(set(templateSetID, withdrawal(templateSetID), smallTemplateAs(300)), set(300, smallRecord(3, "node-a"))))
	f.Add(message(set(templateSetID, withdrawal(257))))
	f.Add(message(set(optionsTemplateSet, []byte{1, 0, 0, 1, 0, 0, 0, 4})))
	f.Add(tmpl[:20])
	f.Fuzz(func(t *testing.T, msg []byte) {
		s := newSession(0)
		if _, err := s.decode(tmpl, t0); err != nil {
			t.Fatal(err)
		}
		res, err := s.decode(msg, t0)
		if err != nil {
			if len(res.records) != 0 {
				t.Fatalf("a refused message yielded %d records", len(res.records))
			}
			return
		}
		for _, r := range res.records {
			if r.domain != res.header.domain || !r.Observed.Equal(res.header.exportTime) {
				t.Fatalf("record without its message's domain or export time: %+v", r)
			}
		}
		// The session stays usable.
		if _, err := s.decode(tmpl, t0); err != nil {
			t.Fatal(err)
		}
	})
}
