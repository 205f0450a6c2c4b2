package flowtable

import (
	"testing"

	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// Equal rows give equal fingerprints; a changed value or another row
// order gives another.
func TestFingerprint(t *testing.T) {
	build := func(ports ...uint16) *Block {
		b := NewBlock(len(ports))
		for _, p := range ports {
			r := flowrecordtest.Records()[0]
			r.Source.Port = p
			b.Add(&Row{Record: r, ClusterUUID: "c"})
		}
		return b
	}
	a, same := build(1, 2), build(1, 2)
	if a.Fingerprint() != same.Fingerprint() {
		t.Error("equal blocks, different fingerprints")
	}
	for name, other := range map[string]*Block{"value": build(1, 3), "order": build(2, 1), "rows": build(1)} {
		if a.Fingerprint() == other.Fingerprint() {
			t.Errorf("another %s, same fingerprint", name)
		}
	}
	a.Reset()
	if a.Fingerprint() != build().Fingerprint() {
		t.Error("a reset block is not an empty one")
	}
}
