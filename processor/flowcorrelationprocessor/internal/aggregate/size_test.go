package aggregate

import (
	"testing"
	"unsafe"
)

// An entry is allocated per held connection: it must stay in the 1408-byte
// allocation size class of Go's allocator (the next one is 1536, 9 % more
// memory per connection held). Fields that would push it over are packed
// (deadlines as Unix ns, peerStart as an int64).
func TestEntryStaysInItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 1408 {
		t.Fatalf("entry is %d bytes, over its 1408-byte size class", n)
	}
}
