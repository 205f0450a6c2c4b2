//go:build integration

package ipfixexporter

import (
	"context"
	"fmt"
	"testing"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

// TestGoIPFIXCollectorDecodesEveryIE sends an IPv4 and an IPv6 record of each
// layout, over TCP and UDP, to go-ipfix v0.17.0's collector and checks that
// every IE of the layout arrives, in template order, with the value sent.
func TestGoIPFIXCollectorDecodesEveryIE(t *testing.T) {
	cases := []struct {
		kind  layout.Kind
		uids  bool
		count int
	}{
		{layout.Aggregate, false, 70},
		{layout.Proxy, false, 50},
		{layout.Agent, false, 43},
		{layout.Aggregate, true, 79},
	}
	for _, transport := range []string{TransportTCP, TransportUDP} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s/uids=%t", transport, c.kind, c.uids), func(t *testing.T) {
				col := startCollector(t, transport, nil)
				cfg := testConfig(col.Endpoint(), transport, c.kind)
				cfg.IncludeK8sUIDs = c.uids
				e, _ := testExporter(t, cfg, nsDialer(col.Netns()))

				recs := []*flowrecord.Record{fullRecord(false), fullRecord(true)}
				if err := e.pushLogs(context.Background(), logsOf(recs...)); err != nil {
					t.Fatal(err)
				}
				got := waitRecords(t, col, 2)
				wantODID := observationDomain(testClusterUUID)
				for i, r := range recs {
					names, _ := layout.Names(cfg.layoutOptions(), r.IsIPv6())
					if len(names) != c.count {
						t.Fatalf("layout has %d IEs, want %d", len(names), c.count)
					}
					var d *ipfixcollector.Record
					wantTemplate := layout.TemplateIDv4
					if r.IsIPv6() {
						wantTemplate = layout.TemplateIDv6
					}
					for j := range got {
						if got[j].TemplateID == wantTemplate {
							d = &got[j]
						}
					}
					if d == nil {
						t.Fatalf("record %d: no record with template %d among %d", i, wantTemplate, len(got))
					}
					if d.ObsDomainID != wantODID {
						t.Errorf("observation domain %d, want %d (FNV-1 of the cluster UUID)", d.ObsDomainID, wantODID)
					}
					if fmt.Sprint(d.Names) != fmt.Sprint(names) {
						t.Errorf("template %d IEs:\n got %v\nwant %v", wantTemplate, d.Names, names)
					}
					want := expected(r, testClusterUUID)
					for _, name := range names {
						if d.Fields[name] != want[name] {
							t.Errorf("template %d IE %s = %q, want %q", wantTemplate, name, d.Fields[name], want[name])
						}
					}
				}
			})
		}
	}
}
