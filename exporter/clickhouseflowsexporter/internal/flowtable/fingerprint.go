package flowtable

import "hash/maphash"

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
			hashValues(&h, buf.time.Data)
		case kindUInt8:
			hashValues(&h, buf.u8)
		case kindUInt16:
			hashValues(&h, buf.u16)
		case kindUInt64:
			hashValues(&h, buf.u64)
		default:
			_, _ = h.Write(buf.str.Buf)
			hashPositions(&h, buf.str.Pos)
		}
	}
	return h.Sum64()
}
