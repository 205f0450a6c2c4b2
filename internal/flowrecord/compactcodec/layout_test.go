package compactcodec

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
)

// version1Layout pins the body's field list (names and kinds, in order) of
// EncodingCompactV1: a change to the catalogue that moves, adds or removes a
// field the body carries fails here. That is a new version: a new
// EncodingCompact constant, and the reader keeping version 1's list.
const version1Layout = "f010702b3cd13030f915ebba39750772cbaeaf91bce0a171ee92b59f9479aade"

func layoutDigest() string {
	var b strings.Builder
	for _, fs := range [][]field{fields, {{name: aggregationPresence}}, aggregationFields} {
		for _, f := range fs {
			fmt.Fprintf(&b, "%s:%s\n", f.name, f.ref.Kind)
		}
	}
	return fmt.Sprintf("%x", sha256.Sum256([]byte(b.String())))
}

func TestVersion1Layout(t *testing.T) {
	if got := layoutDigest(); got != version1Layout {
		t.Fatalf("the compact body's field list changed (digest %s, version 1 is %s): a new version of the encoding, see the package doc", got, version1Layout)
	}
}
