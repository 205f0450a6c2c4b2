package store

import (
	"net/netip"
	"testing"
	"time"
)

// BenchmarkStoreUpdate mirrors Antrea's BenchmarkAddOrUpdateConns: a store of
// 10,000 connections receives a poll in which 1,000 connections are new and
// 1,000 are gone (the window of tuples slides by 1,000 each poll); the other
// 9,000 have new counters. One op is one poll applied to the store (Begin,
// 10,000 Observe, End) plus the export of what is due.
func BenchmarkStoreUpdate(b *testing.B) {
	const total, churn = 10_000, 1_000
	s := New(Config{ActiveTimeout: 5 * time.Second, IdleTimeout: 15 * time.Second, StaleTimeout: 5 * time.Minute})
	conn := func(i, round int) Conn {
		return Conn{
			Key: Key{
				Src: netip.AddrFrom4([4]byte{10, 1, byte(i >> 16), byte(i >> 8)}), Dst: netip.AddrFrom4([4]byte{10, 2, 0, byte(i)}),
				SrcPort: uint16(i), DstPort: 80, Proto: 6,
			},
			ID: uint32(i), TCPState: TCPEstablished,
			Orig: Counters{Packets: uint64(round), Bytes: uint64(round) * 100},
		}
	}
	// The dump of each poll is built before the timer runs, as Antrea's
	// benchmark does; polls reuse two buffers.
	dumps := [2][]Conn{make([]Conn, total), make([]Conn, total)}
	build := func(round int) []Conn {
		d := dumps[round%2]
		for j := range d {
			d[j] = conn(round*churn+j, round)
		}
		return d
	}
	now := time.Unix(1_800_000_000, 0)
	poll := func(dump []Conn) {
		s.BeginPoll(now)
		for i := range dump {
			s.Observe(&dump[i])
		}
		s.EndPoll()
	}
	poll(build(0))
	var out []Export
	b.ReportAllocs()
	for round := 1; b.Loop(); round++ {
		b.StopTimer()
		dump := build(round)
		now = now.Add(time.Second)
		b.StartTimer()
		poll(dump)
		out = s.Expired(now, out[:0])
	}
	b.ReportMetric(float64(s.Len()), "conns")
}
