package flowstreamexporter

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// benchEntries are distinct records, converted as the exporter converts them.
func benchEntries(n int) []entry {
	out := make([]entry, n)
	for i := range out {
		r := podRecord("ns-a", "web", "ns-b", "api")
		r.Source.Port = uint16(i)
		r.End = t0.Add(time.Duration(i) * time.Millisecond)
		out[i] = makeEntry(r)
	}
	return out
}

// BenchmarkRingFollowers: records per second written into the ring while
// N following cluster-wide streams read it (their sends go nowhere, so
// this is the server's cost, not the network's). The writer never waits
// for a reader; delivered/s is what the readers took out, lost/record
// what they lost to being lapped.
func BenchmarkRingFollowers(b *testing.B) {
	batch := benchEntries(100)
	for _, followers := range []int{0, 10, 100} {
		b.Run(fmt.Sprintf("followers=%d", followers), func(b *testing.B) {
			r := newRing(defaultBufferSize)
			q, err := parseRequest(&pb.GetFlowsRequest{ClusterWide: true, Follow: true})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var mu sync.Mutex
			var sent, dropped uint64
			for range followers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = serve(ctx, r, q, &viewer{scope: q.scope}, time.Minute, r.oldest(), func(resp *pb.GetFlowsResponse, d uint64) error {
						mu.Lock()
						sent += uint64(len(resp.Flows))
						dropped += d
						mu.Unlock()
						return nil
					})
				}()
			}
			start := time.Now()
			for b.Loop() {
				r.push(batch)
			}
			elapsed := time.Since(start)
			cancel()
			r.close()
			wg.Wait()
			pushed := float64(b.N * len(batch))
			b.ReportMetric(pushed/elapsed.Seconds(), "records/s")
			if followers > 0 {
				// What the followers got (summed), and the share they lost
				// to the writer lapping them.
				b.ReportMetric(float64(sent)/elapsed.Seconds(), "delivered/s")
				b.ReportMetric(float64(dropped)/(pushed*float64(followers)), "lost/record")
			}
		})
	}
}

// BenchmarkStreamMemory: heap held per idle following stream (its
// goroutine, batch buffer and ticker), measured over 1000 streams.
func BenchmarkStreamMemory(b *testing.B) {
	const streams = 1000
	for b.Loop() {
		r := newRing(16)
		q, _ := parseRequest(&pb.GetFlowsRequest{ClusterWide: true, Follow: true})
		ctx, cancel := context.WithCancel(context.Background())
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var wg sync.WaitGroup
		started := make(chan struct{}, streams)
		for range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started <- struct{}{}
				_ = serve(ctx, r, q, &viewer{scope: q.scope}, time.Minute, r.oldest(), func(*pb.GetFlowsResponse, uint64) error { return nil })
			}()
		}
		for range streams {
			<-started
		}
		time.Sleep(50 * time.Millisecond) // every stream waits in its select
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse+after.StackInuse-before.HeapInuse-before.StackInuse)/streams, "B/stream")
		cancel()
		wg.Wait()
	}
}
