package attrcodec

import "net/netip"

// An addrCache holds the addresses of the texts a Decoder parsed last, one
// a slot, the slot chosen by where the text is in memory (addrSlot; the
// flowtel_safe build hashes the text instead): the records a
// gateway decodes were mostly encoded in the same process, from the
// encoder's cache of address texts (addrtext.go), so the same address comes
// as the same string. A text is compared in full, as another may share its
// slot (a string elsewhere with the same bytes is a miss, no more); for the
// same string that is a pointer comparison. A slot keeps its text alive.
type addrCache [addrCacheSlots]struct {
	text string
	addr netip.Addr
}

const addrCacheBits = 6
const addrCacheSlots = 1 << addrCacheBits

// parse is netip.ParseAddr(s) when it succeeds, and whether it does.
func (c *addrCache) parse(s string) (netip.Addr, bool) {
	e := &c[addrSlot(s)]
	if e.text == s && s != "" {
		return e.addr, true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	e.text, e.addr = s, a
	return a, true
}
