//go:build integration

package conntrackreceiver

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
)

// TestNothingLostSilently: records the next consumer refuses and connections
// over max_connections are counted.
func TestNothingLostSilently(t *testing.T) {
	l := newLab(t)
	node := l.path(l.node)
	createEntries(t, node,
		entry{proto: 17, src: "10.201.1.2:1001", dst: "10.201.2.2:53"},
		entry{proto: 17, src: "10.201.1.2:1002", dst: "10.201.2.2:53"},
		entry{proto: 17, src: "10.201.1.2:1003", dst: "10.201.2.2:53"},
	)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	cfg := testConfig(node)
	cfg.MaxConnections = 2
	rcv, err := NewFactory().CreateLogs(context.Background(), set, cfg, consumertest.NewErr(errors.New("pipeline full")))
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, rcv: rcv, tel: tel}
	t.Cleanup(h.stop)
	deadline := time.Now().Add(10 * time.Second)
	for h.counter("otelcol_receiver_conntrack_records_dropped", "consumer_error") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("refused records were not counted as dropped")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if shed := h.counter("otelcol_receiver_conntrack_connections_shed", "max_connections"); shed < 1 {
		t.Fatalf("shed %d, want the third connection counted", shed)
	}
	if n := h.counter("otelcol_receiver_refused_log_records", ""); n < 2 {
		t.Fatalf("receiverhelper refused count %d, want ≥ 2", n)
	}
}
