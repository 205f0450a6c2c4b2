package flowtable

import (
	"hash/maphash"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
)

// fingerprintSeed is fixed for the process: a block's fingerprint is only
// compared with fingerprints of the same process.
var fingerprintSeed = maphash.MakeSeed()

// Fingerprint is a hash of the block's values, the same for two blocks with
// the same rows in the same order. The exporter recognises a batch it
// retries by it.
func (b *Block) Fingerprint() uint64 {
	var h maphash.Hash
	h.SetSeed(fingerprintSeed)
	for i := range b.cols {
		buf := &b.cols[i]
		switch Columns[i].kind {
		case kindTime:
			_, _ = h.Write(bytesOf(buf.time.Data))
		case kindUInt8:
			_, _ = h.Write(bytesOf(buf.u8))
		case kindUInt16:
			_, _ = h.Write(bytesOf(buf.u16))
		case kindUInt64:
			_, _ = h.Write(bytesOf(buf.u64))
		default:
			_, _ = h.Write(buf.str.Buf)
			_, _ = h.Write(bytesOf(buf.str.Pos))
		}
	}
	return h.Sum64()
}

// bytesOf is the memory of a slice of fixed-size values (no pointers).
func bytesOf[T proto.DateTime | uint8 | uint16 | uint64 | proto.Position](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
