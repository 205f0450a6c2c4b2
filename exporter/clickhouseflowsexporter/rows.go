package clickhouseflowsexporter

import (
	"runtime"
	"sync"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// minRowsPerWorker is the share of a batch below which another goroutine is
// not worth starting: decoding and building a row costs a few microseconds,
// so a share this size is tens of milliseconds of work.
const minRowsPerWorker = 8192

// buildBlocks decodes the n log records of ld and builds their rows. A large
// batch is split into consecutive shares built on up to GOMAXPROCS goroutines,
// one block each; inserting the blocks in order keeps the records' order.
// Records that are not flow records are skipped and counted in bad.
func (e *flowsExporter) buildBlocks(ld plog.Logs, n int) (blocks []*flowtable.Block, bad int, firstErr error) {
	workers := max(1, min(runtime.GOMAXPROCS(0), n/minRowsPerWorker))
	blocks = make([]*flowtable.Block, workers)
	for w := range blocks {
		blocks[w] = e.blocks.Get().(*flowtable.Block)
	}
	if workers == 1 {
		bad, firstErr = e.fillBlock(blocks[0], ld, 0, n)
		return blocks, bad, firstErr
	}
	bads := make([]int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range blocks {
		wg.Go(func() {
			bads[w], errs[w] = e.fillBlock(blocks[w], ld, w*n/workers, (w+1)*n/workers)
		})
	}
	wg.Wait() // pdata is only read, so the shares can be read concurrently
	for w := range blocks {
		bad += bads[w]
		if firstErr == nil {
			firstErr = errs[w]
		}
	}
	return blocks, bad, firstErr
}

// fillBlock adds the rows of records from to to-1 (counted across ld's
// resource and scope logs) to block.
func (e *flowsExporter) fillBlock(block *flowtable.Block, ld plog.Logs, from, to int) (bad int, firstErr error) {
	var rec flowrecord.Record
	row := flowtable.Row{Record: &rec}
	seen := 0 // records before the current scope logs
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len() && seen < to; i++ {
		rl := rls.At(i)
		row.ClusterUUID = e.clusterUUID(rl)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len() && seen < to; j++ {
			lrs := sls.At(j).LogRecords()
			for k := max(0, from-seen); k < lrs.Len() && seen+k < to; k++ {
				if err := flowrecord.Decode(lrs.At(k), &rec); err != nil {
					bad++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				block.Add(&row)
			}
			seen += lrs.Len()
		}
	}
	return bad, firstErr
}

// clusterUUID is the configured cluster UUID, else the resource's k8s.cluster.uid.
func (e *flowsExporter) clusterUUID(rl plog.ResourceLogs) string {
	if e.cfg.ClusterUUID != "" {
		return e.cfg.ClusterUUID
	}
	if v, ok := rl.Resource().Attributes().Get(flowrecord.ResourceClusterUID); ok {
		return v.AsString()
	}
	return ""
}
