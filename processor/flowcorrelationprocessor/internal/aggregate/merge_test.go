package aggregate

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// The paired record keeps the pre-DNAT destination of the half whose Node
// translated it, whichever half arrives first. The other half has no DNAT:
// its original destination is the Pod itself, as conntrack reports it.
func TestPairKeepsTheTranslatedDestinationInEitherOrder(t *testing.T) {
	pod := netip.MustParseAddrPort("10.0.0.2:5678")
	cases := []struct {
		name       string
		src, dst   netip.AddrPort // each half's original destination
		want       netip.AddrPort
		srcPodHalf bool // the source half is built by srcHalf (else a NodePort ingress half)
	}{
		// Pod → ClusterIP, DNATed by the source Node's proxy.
		{name: "clusterip_v4", src: netip.MustParseAddrPort("192.168.0.1:80"), dst: pod, want: netip.MustParseAddrPort("192.168.0.1:80"), srcPodHalf: true},
		{name: "clusterip_v6", src: netip.MustParseAddrPort("[2001:0:3238:bbbb:63::aaaa]:80"),
			dst: netip.MustParseAddrPort("[2001:0:3238:dfe1:63::fefc]:5678"), want: netip.MustParseAddrPort("[2001:0:3238:bbbb:63::aaaa]:80"), srcPodHalf: true},
		// Pod → the other Node's NodePort, DNATed by the destination Node: the
		// source Node saw no translation (its original destination is the
		// NodePort it dialled, equal to its destination).
		{name: "dnat_on_destination_node", src: netip.MustParseAddrPort("10.0.0.200:30080"),
			dst: netip.MustParseAddrPort("10.0.0.200:30080"), want: netip.MustParseAddrPort("10.0.0.200:30080"), srcPodHalf: true},
		// External client → NodePort, DNATed and SNATed by the ingress Node.
		{name: "nodeport_from_external", src: netip.MustParseAddrPort("10.0.0.254:30080"), dst: pod, want: netip.MustParseAddrPort("10.0.0.254:30080")},
		// Nobody translated: the Pod itself.
		{name: "no_dnat", src: pod, dst: pod, want: pod, srcPodHalf: true},
	}
	for _, c := range cases {
		for _, srcFirst := range []bool{true, false} {
			t.Run(c.name+map[bool]string{true: "/source_first", false: "/destination_first"}[srcFirst], func(t *testing.T) {
				fam := v4
				if c.want.Addr().Is6() {
					fam = v6
				}
				var src, dst *flowrecord.Record
				if c.srcPodHalf {
					src = srcHalf(fam, flowrecord.FlowTypeInterNode, false, 0)
					dst = dstHalf(fam, flowrecord.FlowTypeInterNode, false, 0)
				} else {
					src, dst = fromExternalHalves()
				}
				if c.name == "dnat_on_destination_node" {
					// The source Node's destination is the NodePort; the pair is
					// keyed by it (both Nodes key the tuple that crosses between them).
					src.Destination.Address, src.Destination.Port = c.src.Addr(), c.src.Port()
					src.Key, dst.Key = "k", "k"
				}
				src.OriginalDestinationAddress, src.OriginalDestinationPort = c.src.Addr(), c.src.Port()
				dst.OriginalDestinationAddress, dst.OriginalDestinationPort = c.dst.Addr(), c.dst.Port()
				first, second := src, dst
				if !srcFirst {
					first, second = dst, src
				}
				tbl, x := newTestTable(t)
				tbl.Add(first, at(1), x.emit)
				tbl.Add(second, at(1), x.emit)
				recs, _ := x.take()
				require.Len(t, recs, 1)
				assert.Equal(t, flowrecord.CorrelationPaired, recs[0].Correlation)
				got := netip.AddrPortFrom(recs[0].OriginalDestinationAddress, recs[0].OriginalDestinationPort)
				assert.Equal(t, c.want, got, "original destination")
			})
		}
	}
}
