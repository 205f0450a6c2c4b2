package antreaflowsreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
)

// TestCompactEncodingHandsOnTheSameRecords: with encoding compact the
// receiver hands on, over IPFIX and over gRPC, records in flowtel's compact
// form that decode to exactly the records the attribute form gives, under
// the same resources.
func TestCompactEncodingHandsOnTheSameRecords(t *testing.T) {
	p := newPKI(t)
	src, dst := interNodeHalves(43512)
	src.Source.PodUID, dst.Destination.PodUID = "uid-a", "uid-web"
	send := func(t *testing.T, encoding string) []plog.Logs {
		s := startReceiver(t, func(c *Config) {
			p.secure(c)
			c.Encoding = encoding
			c.ClusterUID = "0b0c0d0e-0000-4000-8000-000000000001"
		})
		newAgent(t, s.cfg.IPFIX.Endpoint, "tcp", "node-a", p.exporterTLS(t, p.clientCert, p.clientKey)).send(t, &src)
		waitRecords(t, s.sink, 1)
		creds := p.grpcTLS(t, p.clientCert, p.clientKey)
		require.NoError(t, exportGRPC(t, s.cfg.GRPC.Endpoint, creds, toFlow(&dst)))
		waitRecords(t, s.sink, 2)
		return s.sink.AllLogs()
	}
	forms := map[string][]plog.Logs{}
	for _, encoding := range []string{"attributes", "compact"} {
		t.Run(encoding, func(t *testing.T) { forms[encoding] = send(t, encoding) })
	}
	count := func(batches []plog.Logs) (compact, all int) {
		for _, l := range batches {
			for i := 0; i < l.ResourceLogs().Len(); i++ {
				lrs := l.ResourceLogs().At(i).ScopeLogs().At(0).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					all++
					if compactcodec.IsCompact(lrs.At(k)) {
						compact++
					}
				}
			}
		}
		return compact, all
	}
	c, n := count(forms["compact"])
	assert.Equal(t, 2, n)
	assert.Equal(t, n, c, "records in the compact form with encoding compact")
	c, n = count(forms["attributes"])
	assert.Equal(t, 2, n)
	assert.Zero(t, c, "records in the compact form with encoding attributes")

	wantRecs, wantNodes := records(t, forms["attributes"])
	gotRecs, gotNodes := records(t, forms["compact"])
	require.Len(t, gotRecs, 2)
	assert.Equal(t, wantNodes, gotNodes, "the records' resources (k8s.node.name)")
	// The gRPC half's observed time is its arrival: the two runs differ there only.
	for i := range gotRecs {
		gotRecs[i].Observed = wantRecs[i].Observed
	}
	assert.Equal(t, wantRecs, gotRecs)
	assert.Equal(t, "0b0c0d0e-0000-4000-8000-000000000001", gotRecs[0].ClusterUID)
}
