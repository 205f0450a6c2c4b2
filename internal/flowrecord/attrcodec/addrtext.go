package attrcodec

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
)

// addrTexts caches the text of addresses Encode wrote recently: the flows of
// a cluster name the same Pods, Nodes and Services over and over, and
// formatting an address allocates its string (a sixth of Encode's
// allocations for an aggregated record). It is direct-mapped, one address a
// slot, the latest written winning: bounded (addrTextSlots entries) and safe
// for concurrent use without a lock, since an entry is never modified once
// published.
var addrTexts [addrTextSlots]atomic.Pointer[addrText]

const (
	addrTextBits  = 12
	addrTextSlots = 1 << addrTextBits
)

type addrText struct {
	addr netip.Addr
	text string
}

// addrString is a.String(), from the cache when a was written recently.
func addrString(a netip.Addr) string {
	b := a.As16()
	h := (binary.LittleEndian.Uint64(b[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(b[8:])) * 0xbf58476d1ce4e5b9
	slot := &addrTexts[h>>(64-addrTextBits)]
	if e := slot.Load(); e != nil && e.addr == a {
		return e.text
	}
	e := &addrText{addr: a, text: a.String()}
	slot.Store(e)
	return e.text
}
