package attrcodec

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cache returns each address's own text, also when addresses evict one
// another from a slot (more addresses than slots) and when they differ only
// in their zone or family.
func TestAddrStringIsTheAddressText(t *testing.T) {
	addrs := []netip.Addr{
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.1"),
		netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("fe80::1%eth1"),
		netip.IPv6Unspecified(), netip.IPv4Unspecified(),
	}
	for i := range 3 * addrTextSlots {
		addrs = append(addrs, netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	for round := range 2 {
		for _, a := range addrs {
			require.Equal(t, a.String(), addrString(a), "round %d", round)
		}
	}
}

func TestAddrStringConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20000 {
				a := netip.AddrFrom4([4]byte{10, byte(g), byte(i >> 8), byte(i % 7)})
				if got := addrString(a); got != a.String() {
					t.Errorf("addrString(%v) = %q", a, got)
					return
				}
			}
		})
	}
	wg.Wait()
}
