//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// TestConcurrentPings runs each of PingCases() through the whole product: the
// two conversations of a case are two connections, each one paired record
// chain with its own ICMP identifier and its own counters, at the OTLP sink.
func TestConcurrentPings(t *testing.T) {
	b := startBed(t, options{gateways: 1, otlp: true})
	for _, pc := range PingCases() {
		b.ping(t, pc)
	}
	deadline := time.Now().Add(90 * time.Second)
	var bad []string
	for {
		recs, err := b.otlp.flowRecords()
		require.NoError(t, err)
		bad = nil
		for _, pc := range PingCases() {
			bad = append(bad, b.checkPings(pc, recs)...)
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	for _, s := range bad {
		t.Error(s)
	}
}

func (b *bed) pingEndpoints(pc Pings) (ns string, src, dst netip.Addr) {
	pick := func(p *netlab.Pod) netip.Addr {
		if pc.IPv6 {
			return p.IPv6
		}
		return p.IPv4
	}
	from, to := b.pods[strings.TrimPrefix(pc.From, "pod:")], b.pods[strings.TrimPrefix(pc.To, "pod:")]
	return from.NS, pick(from), pick(to)
}

// ping runs the case's conversations at once.
func (b *bed) ping(t *testing.T, pc Pings) {
	t.Helper()
	ns, _, dst := b.pingEndpoints(pc)
	var wg sync.WaitGroup
	errs := make([]error, len(pc.IDs))
	for i := range pc.IDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := netlab.Exec(context.Background(), ns, b.peer, "ping", "-to", dst.String(),
				"-id", fmt.Sprint(pc.IDs[i]), "-count", fmt.Sprint(pc.Count[i]))
			if err != nil {
				errs[i] = fmt.Errorf("%s, id %#x: %v: %s", pc.Name, pc.IDs[i], err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// checkPings lists what is wrong with the records of a case: every record
// between its Pods belongs to one of its identifiers and is paired; each
// identifier's latest record counts its echoes each way; the two have two keys.
func (b *bed) checkPings(pc Pings, recs []flowrecord.Record) []string {
	_, src, dst := b.pingEndpoints(pc)
	proto, echoType := uint8(1), uint8(8)
	if pc.IPv6 {
		proto, echoType = 58, 128
	}
	latest := map[uint16]flowrecord.Record{}
	keys := map[string]bool{}
	var bad []string
	for _, r := range recs {
		if r.Protocol != proto || r.Source.Address != src || r.Destination.Address != dst {
			continue
		}
		if r.ICMP.ID != pc.IDs[0] && r.ICMP.ID != pc.IDs[1] {
			bad = append(bad, fmt.Sprintf("%s: a record with ICMP id %#x", pc.Name, r.ICMP.ID))
			continue
		}
		if r.Correlation != flowrecord.CorrelationPaired || r.ICMP.Type != echoType {
			bad = append(bad, fmt.Sprintf("%s, id %#x: a %s record of ICMP type %d, want paired echo requests (%d)",
				pc.Name, r.ICMP.ID, r.Correlation, r.ICMP.Type, echoType))
		}
		keys[r.Key] = true
		if l, ok := latest[r.ICMP.ID]; !ok || r.Stats.PacketTotal >= l.Stats.PacketTotal {
			latest[r.ICMP.ID] = r
		}
	}
	for i, id := range pc.IDs {
		n := uint64(pc.Count[i])
		r, ok := latest[id]
		if !ok || r.Stats.PacketTotal != n || r.ReverseStats.PacketTotal != n {
			bad = append(bad, fmt.Sprintf("%s, id %#x: latest record has %d/%d packets (found: %v), want %d each way",
				pc.Name, id, r.Stats.PacketTotal, r.ReverseStats.PacketTotal, ok, n))
		}
	}
	if len(keys) != 2 {
		bad = append(bad, fmt.Sprintf("%s: flow keys %v, want one per identifier", pc.Name, keys))
	}
	return bad
}
