package antreaflowsreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestIPFIXTransports: two agents (go-ipfix exporting processes with
// Antrea's agent templates) send the halves of an inter-Node connection over
// TCP, TLS (with client certificates) and UDP; each record becomes its Node's
// half, field for field, under its Node's resource.
func TestIPFIXTransports(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		transport string
		tls       bool
	}{{"tcp", false}, {"tls", true}, {"udp", false}} {
		t.Run(tc.transport, func(t *testing.T) {
			s := startReceiver(t, func(c *Config) {
				if tc.tls {
					p.secure(c)
				}
			})
			network := "tcp"
			if tc.transport == "udp" {
				network = "udp"
			}
			var tlsCfg = p.exporterTLS(t, p.clientCert, p.clientKey)
			if !tc.tls {
				tlsCfg = nil
			}
			src, dst := interNodeHalves(43512)
			newAgent(t, s.cfg.IPFIX.Endpoint, network, "node-a", tlsCfg).send(t, &src)
			newAgent(t, s.cfg.IPFIX.Endpoint, network, "node-b", tlsCfg).send(t, &dst)
			waitRecords(t, s.sink, 2)

			got, nodes := records(t, s.sink.AllLogs())
			require.Len(t, got, 2)
			byNode := map[string]flowrecord.Record{}
			for i, r := range got {
				assert.Equal(t, r.Reporter.NodeName, nodes[i], "the resource names the reporting Node")
				byNode[nodes[i]] = r
			}
			// The agent's exporting process stamps its messages with its clock.
			want := wantInterNodeSource(43512)
			assert.WithinDuration(t, time.Now(), byNode["node-a"].Observed, 10*time.Second)
			want.Observed = byNode["node-a"].Observed
			assert.Equal(t, want, byNode["node-a"])

			d := byNode["node-b"]
			assert.Equal(t, flowrecord.Reporter{NodeName: "node-b", Side: flowrecord.SideDestination}, d.Reporter)
			assert.Equal(t, flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaNetworkPolicy, Namespace: "default",
				Name: "anp-web", RuleName: "from-a", RuleAction: flowrecord.RuleActionAllow}, d.IngressPolicy)
			assert.Equal(t, "6|10.10.0.5:43512|10.10.1.7:8080", d.Key)
			assert.Equal(t, d.Key, byNode["node-a"].Key, "both halves carry the same correlation key")

			assert.Equal(t, int64(2), s.counter(t, "otelcol_receiver_antrea_flows_records_received", "transport", tc.transport))
			assert.Equal(t, int64(2), s.counter(t, "otelcol_receiver_antrea_flows_records_emitted", "", ""))
		})
	}
}

// TestIPFIXv6AndEgress: the IPv6 template and a to-external record with its
// Egress, as the agent writes it (the Egress IP as text).
func TestIPFIXv6AndEgress(t *testing.T) {
	s := startReceiver(t, nil)
	g := newAgent(t, s.cfg.IPFIX.Endpoint, "tcp", "node-a", nil)
	e := toExternal()
	g.send(t, &e)
	v6 := intraNode()
	v6.Source.Address, v6.Destination.Address = mustAddr("fd00:10:10::5"), mustAddr("fd00:10:10::9")
	g.send(t, &v6)
	waitRecords(t, s.sink, 2)
	got, _ := records(t, s.sink.AllLogs())
	require.Len(t, got, 2)
	assert.Equal(t, flowrecord.Egress{Name: "egress-x", Address: egressX, NodeName: "node-b"}, got[0].Egress)
	assert.Equal(t, flowrecord.EndpointExternal, got[0].Destination.Kind)
	assert.Equal(t, flowrecord.SideSource, got[0].Reporter.Side)
	assert.Equal(t, mustAddr("fd00:10:10::9"), got[1].Destination.Address)
	assert.Equal(t, flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideBoth}, got[1].Reporter)
	assert.Equal(t, "17|[fd00:10:10::5]:5353|[fd00:10:10::9]:53", got[1].Key)
}
