package conntrackreceiver

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// The checkpoint keeps, per connection, what was last exported; an end of
// flow exported while conntrack still holds the connection is kept as
// closed, one exported after it left is removed, and a value written by the
// previous release (version 2, no flags) is still read, so an upgrade resumes.
func TestCheckpointValues(t *testing.T) {
	conn := store.Conn{Key: store.Key{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("fd00::2"),
		SrcPort: 41000, DstPort: 8080, Proto: 6}, ID: 7, TCPState: store.TCPTimeWait,
		Orig: store.Counters{Packets: 10, Bytes: 1000}, Reply: store.Counters{Packets: 8, Bytes: 4000}}
	c := &checkpoint{}
	c.note([]store.Export{{Conn: conn, KernelStart: 42, Reason: flowrecord.EndReasonEndOfFlow, Lingers: true,
		OrigDelta: store.Counters{Packets: 1}}}, 99)
	require.Len(t, c.ops, 1)
	require.Equal(t, storage.Set, c.ops[0].Type)
	x, ok := decodeExported(c.ops[0].Key, c.ops[0].Value)
	require.True(t, ok)
	require.Equal(t, store.Exported{Key: conn.Key, ID: 7, Orig: conn.Orig, Reply: conn.Reply, TCPState: store.TCPTimeWait,
		Start: 42, At: 99, Closed: true}, x)

	// Version 2: the same without the flags byte.
	v2 := append([]byte{2}, c.ops[0].Value[1:checkpointValueLen-1]...)
	x, ok = decodeExported(c.ops[0].Key, v2)
	require.True(t, ok)
	require.False(t, x.Closed)
	require.Equal(t, uint64(4000), x.Reply.Bytes)
	_, ok = decodeExported(c.ops[0].Key, append([]byte{9}, c.ops[0].Value[1:]...))
	require.False(t, ok, "an unknown version")

	// Gone (a DESTROY event): removed; never saved when it is its only record.
	c.ops = c.ops[:0]
	c.note([]store.Export{{Conn: conn, Reason: flowrecord.EndReasonEndOfFlow, OrigDelta: store.Counters{Packets: 1}}}, 100)
	require.Len(t, c.ops, 1)
	require.Equal(t, storage.Delete, c.ops[0].Type)
	c.ops = c.ops[:0]
	c.note([]store.Export{{Conn: conn, Reason: flowrecord.EndReasonEndOfFlow, OrigDelta: conn.Orig, ReplyDelta: conn.Reply}}, 100)
	require.Empty(t, c.ops)
}
