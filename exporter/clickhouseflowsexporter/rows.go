package clickhouseflowsexporter

import (
	"sync"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// chunkRows is how many records fillBlock decodes before it adds them to
// the block, column by column (flowtable.Block.AddRows): enough for a
// column's loop to pay off, few enough for the records to stay in cache.
const chunkRows = 32

// chunk is the records fillBlock decodes before adding them to the block,
// each with its own Decoder: a Decoder lends the next record it decodes the
// memory (label maps, aggregation) of the one before, which must stay intact
// until AddRows.
type chunk struct {
	decs [chunkRows]attrcodec.Decoder
	recs [chunkRows]flowrecord.Record
	rows [chunkRows]flowtable.Row
}

// chunks are the chunks of finished fillBlocks.
var chunks = sync.Pool{New: func() any { return new(chunk) }}

// fillBlock decodes the log records of ld and adds their rows to block.
// Records that are not flow records are skipped and counted in bad.
//
// It runs on one goroutine: building a row costs about a third of what the
// client spends on it (the rest is the driver's encoding and the INSERT), and
// splitting a 20,000-row batch over two goroutines did not shorten the insert
// on two cores shared with the server; the queue's consumers already insert
// several batches at once under load.
func (e *flowsExporter) fillBlock(block *flowtable.Block, ld plog.Logs) (bad int, firstErr error) {
	c := chunks.Get().(*chunk)
	defer chunks.Put(c)
	n := 0
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		uuid := e.clusterUUID(rl)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				if err := c.decs[n].Decode(lrs.At(k), &c.recs[n]); err != nil {
					bad++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				c.rows[n] = flowtable.Row{Record: &c.recs[n], ClusterUUID: uuid}
				if n++; n == chunkRows {
					block.AddRows(c.rows[:n])
					n = 0
				}
			}
		}
	}
	block.AddRows(c.rows[:n])
	return bad, firstErr
}

// clusterUUID is the configured cluster UUID, else the resource's k8s.cluster.uid.
func (e *flowsExporter) clusterUUID(rl plog.ResourceLogs) string {
	if e.cfg.ClusterUUID != "" {
		return e.cfg.ClusterUUID
	}
	if v, ok := rl.Resource().Attributes().Get(catalogue.ResourceClusterUID); ok {
		return v.AsString()
	}
	return ""
}
