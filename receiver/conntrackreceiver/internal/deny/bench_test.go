package deny

import (
	"testing"
	"time"
)

// BenchmarkStoreAdd: one logged packet into the store, on a held 5-tuple
// (a retransmission) and on a new one each time (a scan).
func BenchmarkStoreAdd(b *testing.B) {
	t0 := time.Unix(1000, 0)
	prefix := []byte("flowtel drop ingress")
	b.Run("held", func(b *testing.B) {
		s := New(Config{IdleTimeout: time.Minute, ActiveTimeout: time.Hour})
		p := ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(40000, 8080)...)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			s.Add(p, prefix, nil, t0.Add(time.Duration(i)))
		}
	})
	b.Run("new", func(b *testing.B) {
		s := New(Config{IdleTimeout: time.Minute, ActiveTimeout: time.Hour})
		p := ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(0, 8080)...)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			p[20], p[21] = byte(i>>8), byte(i)
			p[12], p[13] = byte(i>>24), byte(i>>16)
			s.Add(p, prefix, nil, t0.Add(time.Duration(i)))
		}
	})
}
