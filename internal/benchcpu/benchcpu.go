// Package benchcpu measures the CPU time a benchmark consumed, so that its
// numbers stay meaningful on a machine shared with other work, where wall
// time per op mostly measures waiting for a core.
package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// Now is the CPU time (user + system) the process has used so far, over all
// its threads (the garbage collector's included).
func Now() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Loop runs op for every iteration of b and reports its allocations and its
// CPU time per op (cpu-ns/op, the garbage collector's included).
func Loop(b *testing.B, op func()) {
	b.ReportAllocs()
	cpu0 := Now()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64((Now()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
