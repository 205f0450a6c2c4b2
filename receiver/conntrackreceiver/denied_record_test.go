package conntrackreceiver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/deny"
)

// TestDeniedRecord: a denied connection's export becomes a record with
// Antrea's deny-store fields, and they survive the codec (what k8s_flow,
// flow_correlation and the exporters read).
func TestDeniedRecord(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0).UTC()
	now := t0.Add(20 * time.Second)
	for _, tt := range []struct {
		name    string
		verdict deny.Verdict
		ingress flowrecord.Policy
		egress  flowrecord.Policy
	}{
		{"ingress drop", deny.Verdict{Action: flowrecord.RuleActionDrop}, flowrecord.Policy{RuleAction: flowrecord.RuleActionDrop}, flowrecord.Policy{}},
		{"egress reject", deny.Verdict{Action: flowrecord.RuleActionReject, Egress: true}, flowrecord.Policy{}, flowrecord.Policy{RuleAction: flowrecord.RuleActionReject}},
	} {
		x := deny.Export{
			Conn: deny.Conn{
				Key:       deny.Key{Src: netip.MustParseAddr("10.0.1.5"), Dst: netip.MustParseAddr("10.0.2.7"), SrcPort: 40000, DstPort: 8080, Proto: 6},
				Verdict:   tt.verdict,
				Conntrack: deny.Conntrack{OrigDst: netip.MustParseAddr("10.96.0.10"), OrigDstPort: 80, Zone: 7, Mark: 0x10},
				Start:     t0, Last: t0.Add(3 * time.Second), Packets: 3, Bytes: 180,
			},
			PacketDelta: 3, OctetDelta: 180,
		}
		var rec flowrecord.Record
		toDeniedRecord(&x, "node-a", now, &rec)
		lr := plog.NewLogRecord()
		attrcodec.Encode(&rec, lr)
		var got flowrecord.Record
		require.NoError(t, attrcodec.Decode(lr, &got), tt.name)
		want := flowrecord.Record{
			Start: t0, End: t0.Add(3 * time.Second), Observed: now, Protocol: 6,
			Source:                     flowrecord.Endpoint{Address: x.Src, Port: 40000},
			Destination:                flowrecord.Endpoint{Address: x.Dst, Port: 8080},
			OriginalDestinationAddress: netip.MustParseAddr("10.96.0.10"), OriginalDestinationPort: 80,
			Conntrack:     flowrecord.Conntrack{Zone: 7, Mark: 0x10},
			Stats:         flowrecord.Counters{PacketTotal: 3, OctetTotal: 180, PacketDelta: 3, OctetDelta: 180},
			EndReason:     flowrecord.EndReasonEndOfFlow,
			IngressPolicy: tt.ingress, EgressPolicy: tt.egress,
			Reporter: flowrecord.Reporter{NodeName: "node-a"},
		}
		require.Equal(t, want.Key, got.Key, tt.name)
		got.Key = ""
		require.Equal(t, want, got, tt.name)
	}
}

// TestDeniedLostPackets: gaps in the group's sequence numbers are packets the
// kernel could not hand over (a full socket): counted lost, also across the
// wrap of the 32-bit counter; a step back is no loss, and a fresh
// subscription starts a new sequence.
func TestDeniedLostPackets(t *testing.T) {
	d := &denied{store: deny.New(deny.Config{IdleTimeout: time.Second, ActiveTimeout: time.Minute})}
	pkt := []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	for _, seq := range []uint32{7, 8, 11, 12, 1<<32 - 1, 1} { // 9 and 10 lost; back to 2^32-1; 0 lost at the wrap
		d.account(&ctsource.LoggedPacket{Payload: pkt, Seq: seq, HasSeq: true})
	}
	require.Equal(t, int64(3), d.counts[outcomeLost])
	require.Equal(t, int64(6), d.counts[deny.Accounted])
	d.haveSeq = false // as runNFLOG does after subscribing again
	d.account(&ctsource.LoggedPacket{Payload: pkt, Seq: 0, HasSeq: true})
	d.account(&ctsource.LoggedPacket{Payload: []byte{0x10}, Seq: 1, HasSeq: true})
	require.Equal(t, int64(3), d.counts[outcomeLost])
	require.Equal(t, int64(1), d.counts[deny.Undecodable])
}
