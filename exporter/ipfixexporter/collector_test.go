package ipfixexporter

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

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
