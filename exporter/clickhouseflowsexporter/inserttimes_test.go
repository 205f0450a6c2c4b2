package clickhouseflowsexporter

import (
	"testing"
	"time"
)

// A failed batch's retry gets its first try's timeInserted; a written one,
// or one too old to be retried, is forgotten.
func TestInsertTimes(t *testing.T) {
	it := newInsertTimes(time.Minute)
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 700_000_000, time.UTC)
	first := it.get(1, t0)
	if !first.Equal(t0.Truncate(time.Second)) {
		t.Fatalf("first try at %s, want %s", first, t0.Truncate(time.Second))
	}
	it.failed(1, first, t0)
	if got := it.get(1, t0.Add(5*time.Second)); !got.Equal(first) {
		t.Errorf("retry at %s, want the first try's %s", got, first)
	}
	if got := it.get(2, t0.Add(5*time.Second)); got.Equal(first) {
		t.Error("another batch got the failed one's time")
	}
	it.done(1)
	if it.len() != 0 {
		t.Errorf("%d batches kept after the write", it.len())
	}
	it.failed(3, first, t0)
	it.failed(4, t0.Add(2*time.Minute), t0.Add(2*time.Minute))
	if it.len() != 1 {
		t.Errorf("%d batches kept, want only the one not older than a minute", it.len())
	}
}
