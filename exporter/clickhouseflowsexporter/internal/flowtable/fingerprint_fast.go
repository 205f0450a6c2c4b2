//go:build !flowtel_safe

package flowtable

import (
	"hash/maphash"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
)

// hashValues hashes the memory of a column of fixed-size values (no
// pointers) in one write. (The flowtel_safe build leaves this file out:
// fingerprint_safe.go hashes value by value.)
func hashValues[T proto.DateTime | uint8 | uint16 | uint64](h *maphash.Hash, s []T) {
	_, _ = h.Write(bytesOf(s))
}

// hashPositions hashes the memory of a String column's positions.
func hashPositions(h *maphash.Hash, s []proto.Position) { _, _ = h.Write(bytesOf(s)) }

// bytesOf is the memory of a slice of fixed-size values (no pointers).
func bytesOf[T proto.DateTime | uint8 | uint16 | uint64 | proto.Position](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
