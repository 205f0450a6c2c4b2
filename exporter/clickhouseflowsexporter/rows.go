package clickhouseflowsexporter

import (
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// fillBlock decodes the log records of ld and adds their rows to block.
// Records that are not flow records are skipped and counted in bad.
//
// It runs on one goroutine: building a row costs about a third of what the
// client spends on it (the rest is the driver's encoding and the INSERT), and
// splitting a 20,000-row batch over two goroutines did not shorten the insert
// on two cores shared with the server; the queue's consumers already insert
// several batches at once under load.
func (e *flowsExporter) fillBlock(block *flowtable.Block, ld plog.Logs) (bad int, firstErr error) {
	var rec flowrecord.Record
	var dec flowrecord.Decoder // block.Add is done with rec before the next record
	row := flowtable.Row{Record: &rec}
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		row.ClusterUUID = e.clusterUUID(rl)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				if err := dec.Decode(lrs.At(k), &rec); err != nil {
					bad++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				block.Add(&row)
			}
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
