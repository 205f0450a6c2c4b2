//go:build integration

package conntrackreceiver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
)

// harness runs one receiver against a sink and in-memory telemetry.
type harness struct {
	t    testing.TB
	rcv  receiver.Logs
	sink *consumertest.LogsSink
	tel  *componenttest.Telemetry
}

func startReceiver(t *testing.T, cfg *Config) *harness {
	t.Helper()
	return startReceiverOn(t, cfg, componenttest.NewNopHost())
}

// startReceiverOn starts a receiver on a host (one offering extensions).
func startReceiverOn(t *testing.T, cfg *Config, host component.Host) *harness {
	t.Helper()
	return startReceiverLogging(t, cfg, host, zap.NewNop())
}

// startReceiverLogging starts a receiver that logs to logger.
func startReceiverLogging(t *testing.T, cfg *Config, host component.Host, logger *zap.Logger) *harness {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = logger
	set.ID = component.NewID(metadata.Type) // as in a collector: the same ID after a restart
	sink := new(consumertest.LogsSink)
	rcv, err := NewFactory().CreateLogs(context.Background(), set, cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, rcv: rcv, sink: sink, tel: tel}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	if h.rcv != nil {
		if err := h.rcv.Shutdown(context.Background()); err != nil {
			h.t.Errorf("shutdown: %v", err)
		}
		h.rcv = nil
	}
}

// records decodes everything the sink received, checking the resource and
// the event name of each record on the way.
func (h *harness) records() []flowrecord.Record {
	h.t.Helper()
	var out []flowrecord.Record
	for _, ld := range h.sink.AllLogs() {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			if v, ok := rl.Resource().Attributes().Get("k8s.node.name"); !ok || v.Str() != "node-a" {
				h.t.Fatalf("resource k8s.node.name = %v, want node-a", v)
			}
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				lrs := rl.ScopeLogs().At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					var r flowrecord.Record
					if err := attrcodec.Decode(lrs.At(k), &r); err != nil {
						h.t.Fatalf("record %d does not decode: %v", k, err)
					}
					if lrs.At(k).EventName() != flowrecord.EventName {
						h.t.Fatalf("event name %q", lrs.At(k).EventName())
					}
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// waitFor polls the sink until cond holds for the records matching match.
func (h *harness) waitFor(what string, match func(*flowrecord.Record) bool, cond func([]flowrecord.Record) bool) []flowrecord.Record {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got []flowrecord.Record
		for _, r := range h.records() {
			if match(&r) {
				got = append(got, r)
			}
		}
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; matching records:\n%s", what, describe(got))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describe(rs []flowrecord.Record) string {
	var s string
	for _, r := range rs {
		s += fmt.Sprintf("  id %d %s %v:%d -> %v:%d (orig dst %v:%d, snat %v:%d) zone %d mark %#x reason %v state %q pkts %d/%d (+%d/+%d) bytes %d/%d\n",
			r.Conntrack.ID, flowrecord.ProtocolName(r.Protocol), r.Source.Address, r.Source.Port, r.Destination.Address, r.Destination.Port,
			r.OriginalDestinationAddress, r.OriginalDestinationPort, r.ProxySNATAddress, r.ProxySNATPort,
			r.Conntrack.Zone, r.Conntrack.Mark, r.EndReason, r.TCPState,
			r.Stats.PacketTotal, r.ReverseStats.PacketTotal, r.Stats.PacketDelta, r.ReverseStats.PacketDelta,
			r.Stats.OctetTotal, r.ReverseStats.OctetTotal)
	}
	return s
}

func hasReason(reason flowrecord.EndReason) func([]flowrecord.Record) bool {
	return func(rs []flowrecord.Record) bool {
		for _, r := range rs {
			if r.EndReason == reason {
				return true
			}
		}
		return false
	}
}

// counter sums a counter's data points with the given reason attribute ("" = all).
func (h *harness) counter(name, reason string) int64 {
	h.t.Helper()
	m, err := h.tel.GetMetric(name)
	if err != nil {
		return 0
	}
	var n int64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			if v, _ := dp.Attributes.Value("reason"); reason == "" || v.AsString() == reason {
				n += dp.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			n += dp.Value
		}
	}
	return n
}
