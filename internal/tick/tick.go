// Package tick runs the periodic work of flowtel's components.
package tick

import (
	"context"
	"time"
)

// Every calls f with the tick's time every d, the first time d from now,
// until ctx is done; it returns then, and never calls f once ctx is done
// (a tick and the end can be ready together, and select picks either). A
// call that overruns a tick is followed at once by the next (a time.Ticker
// keeps one tick).
func Every(ctx context.Context, d time.Duration, f func(now time.Time)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if ctx.Err() != nil {
				return
			}
			f(now)
		}
	}
}
