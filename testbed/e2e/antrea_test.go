//go:build integration

package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAntreaAgents: the Nodes export as unmodified Antrea agents do (Antrea's
// agent IPFIX layout and observation domains) to the gateway's antrea_flows
// receiver instead of flowtel's OTLP, and the rows in ClickHouse are the ones
// the native path writes (TestScenarios' expectations) for inter-Node,
// intra-Node, Service and NodePort connections: each agent's half is its
// Node's half, and flow_correlation pairs them.
func TestAntreaAgents(t *testing.T) {
	b := startBed(t, options{gateways: 1, antreaAgents: true})
	var cases []Case
	for _, c := range Cases() {
		if slices.Contains(agentCases, strings.TrimSuffix(c.Name, " (IPv6)")) {
			// What the agent layout does not carry: flowtel's endpoint kinds.
			c.Expect.SourceKind, c.Expect.DestinationKind = "", ""
			cases = append(cases, c)
		}
	}
	if len(cases) != 2*len(agentCases) {
		t.Fatalf("%d cases selected, want %d (IPv4 and IPv6 of each)", len(cases), 2*len(agentCases))
	}
	for _, c := range cases {
		b.run(t, c)
	}
	b.check(t, cases, 90*time.Second)
}

// agentCases are the connections an Antrea agent reports (Pod endpoints):
// not the host-network ones (Antrea issue #8260), which only flowtel's node
// collector reports.
var agentCases = []string{
	"intra-Node Pod to Pod",
	"inter-Node Pod to Pod",
	"remote Service access (ClusterIP)",
	"local Service access (ClusterIP)",
	"from external, NodePort on another Node (SNAT)",
	"Pod to the NodePort of another Node",
}
