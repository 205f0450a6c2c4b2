package nodeidentityprocessor

import (
	"context"
	"crypto/sha256"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
	"github.com/flowtel/flowtel/processor/nodeidentityprocessor/internal/metadata"
)

const (
	accepted = "otelcol_processor_node_identity_records_accepted"
	refused  = "otelcol_processor_node_identity_records_refused"
	reviews  = "otelcol_processor_node_identity_token_reviews"
)

// forms are the two forms of a record a node collector sends.
var forms = []struct {
	name   string
	encode func(*flowrecord.Record, plog.LogRecord)
}{{"compact", compactcodec.Encode}, {"attributes", attrcodec.Encode}}

// reviewed is a processor whose reviewer knows the token of node's
// collector already (the steady state: no TokenReview), with the telemetry
// of set and node-b's addresses for every Node, and the context of a request
// carrying that token.
func reviewed(tb testing.TB, set component.TelemetrySettings, node string) (*nodeIdentity, context.Context) {
	tel, err := metadata.NewTelemetryBuilder(set)
	require.NoError(tb, err)
	cfg := createDefaultConfig()
	p := &nodeIdentity{cfg: cfg, logger: zap.NewNop(), tel: tel, rev: newReviewer(nil, cfg, tel), nodes: fixedAddresses(nodeBAddrs)}
	token := "token-of-" + node
	p.rev.cache[sha256.Sum256([]byte(token))] = verdict{node: node, expires: time.Now().Add(time.Hour)}
	md := client.NewMetadata(map[string][]string{"authorization": {"Bearer " + token}})
	return p, client.NewContext(context.Background(), client.Info{Metadata: md})
}

// fixedAddresses gives every Node the same addresses.
type fixedAddresses func() ([]netip.Addr, error)

func (f fixedAddresses) addresses(context.Context, string) ([]netip.Addr, error) { return f() }

// counter sums the data points of a counter name of tel with the reason
// attribute reason ("": every reason).
func counter(t *testing.T, tel *componenttest.Telemetry, name, reason string) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0
	}
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if v, _ := dp.Attributes.Value("reason"); reason == "" || v.AsString() == reason {
			n += dp.Value
		}
	}
	return n
}

// TestProcessLogsBothForms: one request of node-b's collector with
// TestCheck's records in both forms, and compact records Decode refuses
// (cut short, a newer version, a byte after the last field). Each is
// counted under check's verdict, or as undecodable, and the records that
// pass go on as they came, in their form, byte for byte.
func TestProcessLogsBothForms(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	p, ctx := reviewed(t, tel.NewTelemetrySettings(), "node-b")

	ld, want := plog.NewLogs(), plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	passing := want.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	verdicts := map[string]int64{}
	cases := checkCases()
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		for _, form := range forms {
			lr := lrs.AppendEmpty()
			form.encode(cases[name].r, lr)
			verdicts[cases[name].reason]++
			if cases[name].reason == "" {
				lr.CopyTo(passing.AppendEmpty())
			}
		}
	}
	good := plog.NewLogRecord()
	compactcodec.Encode(flowrecordtest.NodeHalf(), good)
	body := good.Body().Bytes().AsRaw()
	for _, malformed := range []func(plog.LogRecord){
		func(lr plog.LogRecord) { lr.Body().SetEmptyBytes().FromRaw(body[:len(body)/2]) },
		func(lr plog.LogRecord) { lr.Attributes().PutStr(compactcodec.AttrRecordEncoding, "compact/2") },
		func(lr plog.LogRecord) { lr.Body().SetEmptyBytes().FromRaw(append(slices.Clone(body), 0)) },
	} {
		lr := lrs.AppendEmpty()
		good.CopyTo(lr)
		malformed(lr)
		var r flowrecord.Record
		require.Error(t, attrcodec.Decode(lr, &r))
		verdicts[refusedUndecodable]++
	}

	sent := int64(lrs.Len())
	out, err := p.processLogs(ctx, ld)
	require.NoError(t, err)
	var m plog.ProtoMarshaler
	got, err := m.MarshalLogs(out)
	require.NoError(t, err)
	wanted, err := m.MarshalLogs(want)
	require.NoError(t, err)
	assert.Equal(t, wanted, got, "the records that pass, as they came")
	assert.Equal(t, verdicts[""], counter(t, tel, accepted, ""))
	for reason, n := range verdicts {
		if reason != "" {
			assert.Equal(t, n, counter(t, tel, refused, reason), reason)
		}
	}
	assert.Equal(t, sent, counter(t, tel, accepted, "")+counter(t, tel, refused, ""), "every record counted once")
}
