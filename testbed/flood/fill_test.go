//go:build integration

package flood

import (
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/require"
	"github.com/ti-mo/netfilter"
	"golang.org/x/sys/unix"
)

// fillBatch is how many entries one sendmsg creates (about 100 bytes each,
// under the socket's send buffer).
const fillBatch = 1000

// filler creates conntrack entries through netlink in batches: one sendmsg
// per fillBatch entries and one acknowledgement per batch, about 200k
// entries a second (ti-mo/conntrack's Create waits for each entry's
// acknowledgement: 4 minutes for a million).
type filler struct{ c *netlink.Conn }

func newFiller(t *testing.T, netns int) *filler {
	t.Helper()
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: netns})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &filler{c: c}
}

// fill creates entries from up to to (excluded): distinct UDP tuples, 60k
// source ports per source address 10.1.x.y, to 10.2.0.1:53, 1 h timeout.
func (f *filler) fill(t *testing.T, from, to int) {
	t.Helper()
	msgs := make([]netlink.Message, 0, fillBatch)
	for i := from; i < to; {
		msgs = msgs[:0]
		for ; i < to && len(msgs) < fillBatch; i++ {
			src := netip.AddrFrom4([4]byte{10, 1, byte(i / 60000 >> 8), byte(i / 60000)})
			msgs = append(msgs, createMessage(t, src, netip.MustParseAddr("10.2.0.1"), uint16(1024+i%60000), 53))
		}
		// Errors come back unasked; the last message asks for an
		// acknowledgement, which follows them.
		msgs[len(msgs)-1].Header.Flags |= netlink.Acknowledge
		sent, err := f.c.SendMessages(msgs)
		require.NoError(t, err)
		last := sent[len(sent)-1].Header.Sequence
		for acked := false; !acked; {
			replies, err := f.c.Receive()
			require.NoError(t, err, "creating entries %d to %d", i-len(msgs), i)
			for _, m := range replies {
				acked = acked || m.Header.Sequence == last
			}
		}
	}
}

// createMessage is an IPCTNL_MSG_CT_NEW request for a UDP entry from src:sp
// to dst:dp, replied to unchanged, with a 1 h timeout.
func createMessage(t *testing.T, src, dst netip.Addr, sp, dp uint16) netlink.Message {
	t.Helper()
	const (
		ctaTupleOrig, ctaTupleReply, ctaTimeout = 1, 2, 7
		ctaTupleIP, ctaTupleProto               = 1, 2
		ctaIPv4Src, ctaIPv4Dst                  = 1, 2
		ctaProtoNum, ctaProtoSrcPort            = 1, 2
		ctaProtoDstPort                         = 3
	)
	tuple := func(typ uint16, s, d netip.Addr, sp, dp uint16) netfilter.Attribute {
		return netfilter.Attribute{Type: typ, Nested: true, Children: []netfilter.Attribute{
			{Type: ctaTupleIP, Nested: true, Children: []netfilter.Attribute{
				{Type: ctaIPv4Src, Data: s.AsSlice()}, {Type: ctaIPv4Dst, Data: d.AsSlice()}}},
			{Type: ctaTupleProto, Nested: true, Children: []netfilter.Attribute{
				{Type: ctaProtoNum, Data: []byte{unix.IPPROTO_UDP}},
				{Type: ctaProtoSrcPort, Data: netfilter.Uint16Bytes(sp)},
				{Type: ctaProtoDstPort, Data: netfilter.Uint16Bytes(dp)}}},
		}}
	}
	m, err := netfilter.MarshalNetlink(netfilter.Header{
		SubsystemID: netfilter.NFSubsysCTNetlink, MessageType: 0, // IPCTNL_MSG_CT_NEW
		Family: netfilter.ProtoIPv4, Flags: netlink.Request | netlink.Create | netlink.Excl,
	}, []netfilter.Attribute{
		tuple(ctaTupleOrig, src, dst, sp, dp),
		tuple(ctaTupleReply, dst, src, dp, sp),
		{Type: ctaTimeout, Data: netfilter.Uint32Bytes(3600)},
	})
	require.NoError(t, err)
	return m
}
