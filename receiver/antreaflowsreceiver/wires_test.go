package antreaflowsreceiver

import (
	"net/netip"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// TestEveryIPFIXFieldCrossesOutAndIn: each catalogue field the receiver
// reads from IPFIX (its IE table, which comes from the catalogue), set in a
// half node-a reports, crosses flowtel's ipfix exporter in Antrea's agent
// layout (IPFIX out) into antrea_flows (IPFIX in) and comes back as it was.
// Driven by the catalogue: a new field with an IE both sides know is covered
// without touching this test; one the agent layout does not write fails it
// unless listed here with why.
func TestEveryIPFIXFieldCrossesOutAndIn(t *testing.T) {
	notInAgentLayout := map[string]string{
		"flow.original_observation_domain_id": "the proxy layouts' IE; antrea_flows reads the agent's own domain from the message header",
		"(cluster_uid)":                       "antrea_flows takes the cluster UID from its configuration",
	}
	g := startReceiver(t, nil)
	export := startAgentLayoutExporter(t, g.cfg.IPFIX.Endpoint, "node-a")
	n := 0
	for _, f := range catalogue.Fields() {
		if !readFromIPFIX(f) {
			continue
		}
		if _, ok := notInAgentLayout[f.Name()]; ok {
			continue
		}
		n++
		want := wantInterNodeSource(43512)
		want.ProxySNATAddress = nodeA // else the receiver drops the SNAT port
		setIfZero(f, &want)
		want.Key = want.CorrelationKey()
		export(nodeLogs(want, ""))
		lastHalfHas(t, g.sink, n, f, &want, "IPFIX out and in")
	}
	t.Logf("%d fields crossed", n)
	if n < 40 {
		t.Errorf("only %d fields crossed", n)
	}
}

// lastHalfHas waits for the sink's nth record and checks that f reads in
// it as in want; how says what brought it there.
func lastHalfHas(t *testing.T, sink *consumertest.LogsSink, n int, f catalogue.Field, want *flowrecord.Record, how string) {
	t.Helper()
	waitRecords(t, sink, n)
	recs, _ := records(t, sink.AllLogs())
	if a, b := valueText(f.Value, &recs[n-1]), valueText(f.Value, want); a != b {
		t.Errorf("%s: %s gives %q, want %q", f.Name(), how, a, b)
	}
}

// readFromIPFIX: the receiver reads one of the field's IEs that exporters write.
func readFromIPFIX(f catalogue.Field) bool {
	for _, ie := range f.IPFIX {
		if !ie.Inbound && setterFor(ie.Enterprise, ie.ID) != nil {
			return true
		}
	}
	return false
}

// setIfZero gives the field of r a value, when r has none: a value the
// receiver keeps for a half node-a reports (enumerations 1, times in whole
// seconds).
func setIfZero(f catalogue.Field, r *flowrecord.Record) {
	ref := f.WireRef()
	l := ref.At(r)
	switch ref.Kind {
	case catalogue.KindUint8, catalogue.KindEnum:
		if *l.Uint8() == 0 {
			*l.Uint8() = 1
		}
	case catalogue.KindUint16:
		if *l.Uint16() == 0 {
			*l.Uint16() = 4242
		}
	case catalogue.KindUint32:
		if *l.Uint32() == 0 {
			*l.Uint32() = 4_000_000_000
		}
	case catalogue.KindUint64:
		if *l.Uint64() == 0 {
			*l.Uint64() = 1 << 40
		}
	case catalogue.KindTime:
		if l.Time().IsZero() {
			*l.Time() = t0.Add(3 * time.Second)
		}
	case catalogue.KindAddr:
		if !l.Addr().IsValid() {
			*l.Addr() = netip.MustParseAddr("10.1.2.3")
		}
	case catalogue.KindString:
		if *l.String() == "" {
			*l.String() = "value-of-" + f.Name()
		}
	}
}
