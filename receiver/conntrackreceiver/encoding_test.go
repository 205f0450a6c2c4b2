package conntrackreceiver

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/deny"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// TestCompactEncodingHandsOnTheSameRecords: with encoding compact the
// receiver hands on its connections' and its denied connections' records in
// flowtel's compact form, decoding to exactly the records the attribute
// form gives.
func TestCompactEncodingHandsOnTheSameRecords(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	conn := store.Export{Conn: store.Conn{Key: store.Key{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		SrcPort: 40000, DstPort: 80, Proto: 6}, OrigDst: netip.MustParseAddr("10.96.0.1"), OrigDstPort: 80, TCPState: 3,
		Orig: store.Counters{Packets: 10, Bytes: 1000}, Reply: store.Counters{Packets: 8, Bytes: 9000}},
		Start: t0, End: t0.Add(5 * time.Second), Reason: flowrecord.EndReasonActiveTimeout}
	denied := deny.Export{Conn: deny.Conn{Key: deny.Key{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.3"),
		SrcPort: 40001, DstPort: 443, Proto: 6}, Start: t0, Last: t0.Add(time.Second), Packets: 3, Bytes: 180}, PacketDelta: 3, OctetDelta: 180}

	run := func(encoding string) []plog.Logs {
		cfg := createDefaultConfig()
		cfg.NodeName, cfg.Encoding = "node-1", encoding
		require.NoError(t, cfg.Validate())
		sink := new(consumertest.LogsSink)
		r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), cfg, sink)
		require.NoError(t, err)
		require.True(t, r.send(context.Background(), []store.Export{conn}, t0.Add(6*time.Second)))
		r.sendDenied(context.Background(), []deny.Export{denied}, t0.Add(6*time.Second))
		require.Len(t, sink.AllLogs(), 2)
		return sink.AllLogs()
	}
	decode := func(batches []plog.Logs) (recs []flowrecord.Record, compact int) {
		for _, l := range batches {
			lrs := l.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
			for i := 0; i < lrs.Len(); i++ {
				if compactcodec.IsCompact(lrs.At(i)) {
					compact++
				}
				var r flowrecord.Record
				require.NoError(t, attrcodec.Decode(lrs.At(i), &r))
				recs = append(recs, r)
			}
		}
		return recs, compact
	}
	want, n := decode(run("attributes"))
	require.Len(t, want, 2)
	assert.Zero(t, n, "records in the compact form with encoding attributes")
	got, n := decode(run("compact"))
	assert.Equal(t, 2, n, "records in the compact form with encoding compact")
	assert.Equal(t, want, got)
	assert.Equal(t, uint64(9000), got[0].ReverseStats.OctetTotal, "the record carries what the connection counted")
}
