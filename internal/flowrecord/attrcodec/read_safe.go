//go:build flowtel_safe

package attrcodec

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// The flowtel_safe build reads pdata through its public API alone (see
// read_fast.go for the other build).

func strOf(v pcommon.Value) (string, bool) { return v.Str(), v.Type() == pcommon.ValueTypeStr }
func intOf(v pcommon.Value) (int64, bool)  { return v.Int(), v.Type() == pcommon.ValueTypeInt }
func boolOf(v pcommon.Value) (bool, bool)  { return v.Bool(), v.Type() == pcommon.ValueTypeBool }
func mapOf(v pcommon.Value) (pcommon.Map, bool) {
	return v.Map(), v.Type() == pcommon.ValueTypeMap
}

// quick decodes only addresses, through the Decoder's cache of the texts it
// parsed last (addrcache.go); every other value goes through the dec*
// functions.
func quick(ref *catalogue.Ref, p catalogue.Loc, v pcommon.Value, sp *spares) bool {
	if ref.Kind != catalogue.KindAddr || sp == nil || v.Type() != pcommon.ValueTypeStr {
		return false
	}
	a, ok := sp.addrs.parse(v.Str())
	if ok {
		*p.Addr() = a
	}
	return ok
}

// fast never walks: Decode walks the attributes through the API.
func (d *attrDecoder) fast(pcommon.Map) (err error, done bool) { return nil, false }

// eachEntry calls f on each entry of m, until it returns an error.
func eachEntry(m pcommon.Map, f func(k string, v pcommon.Value) error) error {
	var err error
	m.Range(func(k string, v pcommon.Value) bool {
		err = f(k, v)
		return err == nil
	})
	return err
}

// sameString is a == b.
func sameString(a, b string) bool { return a == b }

// addrSlot is the slot of an addrCache for text s: by its bytes (FNV-1a),
// where the other build takes where s is in memory.
func addrSlot(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h >> (64 - addrCacheBits)
}
