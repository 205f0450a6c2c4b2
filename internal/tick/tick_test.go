package tick

import (
	"context"
	"testing"
	"time"
)

func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0 // f runs on Every's goroutine only
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func(time.Time) {
			if calls++; calls == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if calls != 3 {
		t.Fatalf("f called %d times, want 3 (none after its context ended)", calls)
	}
}
