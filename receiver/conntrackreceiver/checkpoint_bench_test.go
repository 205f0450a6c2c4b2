package conntrackreceiver

import (
	"context"
	"net/netip"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// BenchmarkCheckpointClosed measures what saving closed connections costs a
// node collector with file_storage: per connection seen closing by a poll
// (TIME_WAIT), one write when its end of flow goes out and one delete when
// it leaves conntrack, each in the poll's one batch (1,000 connections per
// poll here). Reported per connection, both operations together.
func BenchmarkCheckpointClosed(b *testing.B) {
	fact := filestorage.NewFactory()
	scfg := fact.CreateDefaultConfig().(*filestorage.Config)
	scfg.Directory = b.TempDir()
	ext, err := fact.Create(context.Background(), extensiontest.NewNopSettings(fact.Type()), scfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := ext.Start(ctx, hostWithStorage{component.MustNewID("file_storage"): ext}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ext.Shutdown(ctx) })
	c, err := openCheckpoint(ctx, hostWithStorage{component.MustNewID("file_storage"): ext},
		component.MustNewID("file_storage"), component.MustNewID("conntrack"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.close(ctx) })

	const perPoll = 1000
	xs := make([]store.Export, perPoll)
	gone := make([]store.Exported, perPoll)
	for i := range xs {
		conn := store.Conn{Key: store.Key{Src: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}),
			Dst: netip.MustParseAddr("10.2.0.1"), SrcPort: uint16(30000 + i), DstPort: 8080, Proto: 6},
			ID: uint32(i + 1), TCPState: store.TCPTimeWait,
			Orig: store.Counters{Packets: 10, Bytes: 3000}, Reply: store.Counters{Packets: 8, Bytes: 2000}}
		xs[i] = store.Export{Conn: conn, KernelStart: int64(i + 1), Reason: flowrecord.EndReasonEndOfFlow,
			Lingers: true, OrigDelta: conn.Orig, ReplyDelta: conn.Reply}
		gone[i] = store.Exported{Key: conn.Key, ID: conn.ID, Start: int64(i + 1)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += perPoll {
		c.note(xs, 1)
		if err := c.commit(ctx); err != nil {
			b.Fatal(err)
		}
		c.forget(gone)
		if err := c.commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// hostWithStorage is a component host offering the given extensions.
type hostWithStorage map[component.ID]component.Component

func (h hostWithStorage) GetExtensions() map[component.ID]component.Component { return h }
