//go:build integration

package ipfixexporter

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/metadata"
	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

// The real go-ipfix v0.17.0 collector comes from testbed/ipfixcollector, the
// harness the end-to-end testbed uses too. Each collector runs in a namespace
// of its own; the exporter dials it from there.

// collectorPort is the IPFIX port in the collector's namespace (every port is
// free in a fresh namespace; an unusual one shows it is really configured).
const collectorPort = 14739

func startCollector(t *testing.T, transport string, tlsOpts *ipfixcollector.TLS) *ipfixcollector.Collector {
	t.Helper()
	return ipfixcollector.Start(t, ipfixcollector.Options{Transport: transport, Port: collectorPort, TLS: tlsOpts})
}

// nsDialer returns the exporter's own dialCollector, run inside namespace ns.
func nsDialer(ns *ipfixcollector.Netns) dialFunc {
	return func(ctx context.Context, network, address string, tlsCfg *tls.Config) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var err error
			c, err = dialCollector(ctx, network, address, tlsCfg)
			return err
		})
		return c, err
	}
}

// waitRecords waits until col holds at least n records.
func waitRecords(t *testing.T, col *ipfixcollector.Collector, n int) []ipfixcollector.Record {
	t.Helper()
	return col.WaitRecords(t, n, 10*time.Second)
}

// TestDefaultQueueToCollector: the exporter as the collector builds it, with
// the default sending queue (several consumers encoding in parallel), delivers
// every record exactly once to the go-ipfix collector.
func TestDefaultQueueToCollector(t *testing.T) {
	col := startCollector(t, TransportTCP, nil)
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = col.Endpoint()
	ctx := context.Background()
	exp, err := newLogsExporter(ctx, exportertest.NewNopSettings(metadata.Type), cfg, nsDialer(col.Netns()))
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	const producers, batches, perBatch = 4, 10, 50
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				if err := exp.ConsumeLogs(ctx, logsOf(recordsWithPorts(20000+(p*batches+b)*perBatch, perBatch)...)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	const total = producers * batches * perBatch
	got := waitRecords(t, col, total)
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range got {
		seen[r.Fields["sourceTransportPort"]]++
	}
	for port := 20000; port < 20000+total; port++ {
		if n := seen[fmt.Sprint(port)]; n != 1 {
			t.Errorf("record with source port %d arrived %d times", port, n)
		}
	}
}
