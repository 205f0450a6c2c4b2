//go:build integration

package deploy_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// halves makes n first halves (one side's record, its peer never comes) of
// distinct connections: valid flow records the gateway must hold.
func halves(from, n int) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	now := pcommon.NewTimestampFromTime(time.Now())
	for i := from; i < from+n; i++ {
		lr := lrs.AppendEmpty()
		lr.SetEventName("network.flow")
		lr.SetTimestamp(now)
		a := lr.Attributes()
		a.PutStr("source.address", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		a.PutStr("destination.address", "10.255.0.1")
		a.PutInt("source.port", int64(1024+i%60000))
		a.PutInt("destination.port", 80)
		a.PutInt("flow.protocol_identifier", 6)
		a.PutStr("flow.key", fmt.Sprintf("overload-%d", i))
		a.PutStr("flow.type", "inter_node") // its peer is the other Node's half
		a.PutStr("flow.reporter.side", "source")
		a.PutStr("flow.reporter.node.name", "node-1")
	}
	return ld
}

// The built gateway with max_records 20 000 and a 150 MiB memory_limiter,
// fed by the node collector's load_balancing exporter (shipped settings,
// in-memory queue) as fast as it takes them, with halves whose peers never
// come: ten times more pending halves than max_records. It holds at most
// max_records (the rest is exported early, counted), memory_limiter refuses
// while the heap is over its soft limit and the exporter retries, RSS stays
// bounded, and every record sent is accepted by the receiver and received by
// flow_correlation: nothing goes missing.
func TestGatewayOverload(t *testing.T) {
	const maxRecords, total, batch = 20_000, 200_000, 500
	gw, port, serverCA, nodeCert, nodeKey := gatewayAndNodeCert(t, fmt.Sprintf(`
processors:
  memory_limiter: {limit_percentage: 0, spike_limit_percentage: 0, limit_mib: 150, spike_limit_mib: 30}
  flow_correlation: {max_records: %d}
`, maxRecords))
	exp := nodeExporter(t, serverCA.file, nodeCert, nodeKey, port)

	var peakRSS int64
	var peakHeld float64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if rss, err := gw.RSS(); err == nil {
				peakRSS = max(peakRSS, rss)
			}
			peakHeld = max(peakHeld, metric(t, gw, "otelcol_processor_flow_correlation_records_pending"))
		}
	}()
	start := time.Now()
	var sent atomic.Int64
	for i := 0; i < total; i += batch {
		for {
			err := exp.ConsumeLogs(context.Background(), halves(i, batch))
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond) // the exporter's queue is full: back off, as the receiver upstream would
		}
		sent.Add(batch)
	}
	const accepted, received = "otelcol_receiver_accepted_log_records", "otelcol_processor_flow_correlation_records_received"
	// Before the exporter stops: a batch the gateway refused is in its retry
	// back-off, which a shutdown would cut short.
	require.Eventually(t, func() bool { return metric(t, gw, received) >= total }, time.Minute, 200*time.Millisecond, "records received by flow_correlation")
	elapsed := time.Since(start)
	require.NoError(t, exp.Shutdown(context.Background()))
	close(stop)
	<-sampled

	refused := metric(t, gw, "otelcol_receiver_refused_log_records")
	early := metric(t, gw, "otelcol_processor_flow_correlation_records_early_exported")
	t.Logf("%d halves in %v (%.0f/s): receiver accepted %.0f, refused %.0f (retried); flow_correlation received %.0f, peak pending %.0f, exported early %.0f; peak RSS %d MB",
		total, elapsed.Round(100*time.Millisecond), float64(total)/elapsed.Seconds(), metric(t, gw, accepted), refused, metric(t, gw, received), peakHeld, early, peakRSS>>20)
	require.GreaterOrEqual(t, metric(t, gw, accepted), float64(total), "records sent but not accepted")
	require.LessOrEqual(t, peakHeld, float64(maxRecords), "halves pending over max_records")
	require.GreaterOrEqual(t, early, float64(total-maxRecords), "halves over max_records not exported early")
	require.Less(t, peakRSS, int64(600<<20), "gateway RSS")
}
