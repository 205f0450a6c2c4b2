//go:build integration

package clickhouseflowsexporter

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// unevenLogs is n records spread over resource and scope logs of uneven
// sizes (including empty ones), every seventh record invalid; it returns the
// number of valid records.
func unevenLogs(n int) (plog.Logs, int) {
	ld := plog.NewLogs()
	good, i := 0, 0
	for r := 0; i < n; r++ {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("k8s.cluster.uid", fmt.Sprintf("c%d", r))
		for s := 0; s < r%4 && i < n; s++ {
			lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
			for range min(n-i, (r*37+s*11)%300) {
				if i%7 == 3 {
					lrs.AppendEmpty().Attributes().PutStr("source.address", "not-an-ip")
				} else {
					one := logsOf("", streamBatch(i, 1)...)
					one.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).CopyTo(lrs.AppendEmpty())
					good++
				}
				i++
			}
		}
	}
	return ld, good
}

// A default-sized batch spread over many resource and scope logs of uneven
// sizes, with invalid records among them, is written whole: every valid
// record once, with its own resource's cluster UUID.
func TestUnevenBatchWrittenOnce(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	cfg := testConfig(srv, "large")
	e, err := newFlowsExporter(cfg, componenttest.NewNopTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.shutdown(ctx) })
	ld, good := unevenLogs(defaultMinRows)
	if err := e.pushLogs(ctx, ld); err != nil {
		t.Fatal(err)
	}
	conn := client(t, srv)
	if n := count(t, conn, "SELECT count() FROM large.flows"); n != uint64(good) {
		t.Errorf("%d rows, want %d", n, good)
	}
	if n := count(t, conn, "SELECT uniqExact(sourcePodName) FROM large.flows"); n != uint64(good) {
		t.Errorf("%d distinct records, want %d", n, good)
	}
	if n := count(t, conn, "SELECT uniqExact(clusterUUID) FROM large.flows"); n < 2 {
		t.Errorf("%d cluster UUIDs, want the resources' several", n)
	}
}

// fillBlock, which decodes records in chunks each with its own Decoder,
// fills the columns that decoding every record on its own and adding it
// gives: no record of a chunk shares memory (label maps, aggregation) with
// another, whatever mix of record kinds and invalid records it holds.
func TestFillBlockChunksAgree(t *testing.T) {
	ld := benchLogs(1)[0]
	more, _ := unevenLogs(500)
	more.ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
	e := &flowsExporter{cfg: &Config{}}
	block := flowtable.NewBlock(0)
	bad, _ := e.fillBlock(block, ld)

	want := flowtable.NewBlock(0)
	wantBad := 0
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				var rec flowrecord.Record
				if err := attrcodec.Decode(lr, &rec); err != nil {
					wantBad++
					continue
				}
				want.Add(&flowtable.Row{Record: &rec, ClusterUUID: e.clusterUUID(rl)})
			}
		}
	}
	if bad != wantBad || bad == 0 {
		t.Errorf("%d bad records, want %d (and some)", bad, wantBad)
	}
	require.Equal(t, want.Len(), block.Len())
	require.Equal(t, want.Slices(), block.Slices())
}
