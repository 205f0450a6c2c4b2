//go:build flowtel_safe

package flowtable

import (
	"encoding/binary"
	"hash/maphash"

	"github.com/ClickHouse/ch-go/proto"
)

// hashValues hashes a column of numbers value by value, each as 8 bytes
// (see fingerprint_fast.go for the other build).
func hashValues[T proto.DateTime | uint8 | uint16 | uint64](h *maphash.Hash, s []T) {
	var b [8]byte
	for _, v := range s {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		_, _ = h.Write(b[:])
	}
}

// hashPositions hashes a String column's positions.
func hashPositions(h *maphash.Hash, s []proto.Position) {
	var b [16]byte
	for _, p := range s {
		binary.LittleEndian.PutUint64(b[:8], uint64(p.Start))
		binary.LittleEndian.PutUint64(b[8:], uint64(p.End))
		_, _ = h.Write(b[:])
	}
}
