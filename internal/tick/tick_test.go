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
				// A tick already due may still win the select once.
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if calls < 3 || calls > 4 {
		t.Fatalf("f called %d times, want 3 (4 if a due tick won the race with the end)", calls)
	}
}
