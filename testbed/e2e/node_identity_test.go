//go:build integration

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestForgedNodeRefused: the bed runs node identity as deployed (each node
// collector sends its own Pod's token; the gateway reviews it with the real
// API server). A connection across two Nodes arrives paired and nothing is
// refused. Then node-2's collector is started again with node-1's token (a
// collector that reports another Node than its Pod's, as one with a stolen
// token would): every record it sends is refused and counted other_node, and
// node-1's half of the next connection arrives alone, unpaired.
func TestForgedNodeRefused(t *testing.T) {
	b := startBed(t, options{gateways: 1, otlp: true})
	gw := b.gateways[0]
	halves := func(sport uint16, correlation flowrecord.CorrelationState) func() []flowrecord.Record {
		return func() []flowrecord.Record {
			recs, err := b.otlp.flowRecords()
			require.NoError(t, err)
			return slices.DeleteFunc(recs, func(r flowrecord.Record) bool {
				return r.Source.Port != sport || r.Correlation != correlation
			})
		}
	}

	honest := Case{Name: "inter-Node, as deployed", From: "pod:client-a", To: "pod:web-b", Proto: "tcp", Sport: 41101}
	b.run(t, honest)
	require.Eventually(t, func() bool { return len(halves(honest.Sport, flowrecord.CorrelationPaired)()) > 0 },
		60*time.Second, time.Second, "%s: no paired record at the OTLP sink", honest.Name)
	require.Zero(t, counted(t, gw, "otelcol_processor_node_identity_records_refused", ""), "refusals with every collector's own token")
	require.Positive(t, counted(t, gw, "otelcol_processor_node_identity_records_accepted", ""))

	require.NoError(t, b.nodes[1].Stop())
	o := b.nodeOptions[1]
	o.Env = slices.Clone(o.Env)
	for i, e := range o.Env {
		if strings.HasPrefix(e, "FLOWTEL_NODE_TOKEN_FILE=") {
			o.Env[i] = strings.Replace(e, b.lab.Nodes[1].Name+".token", b.lab.Nodes[0].Name+".token", 1)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.nodes[1], _ = startCollector(t, ctx, o)

	forged := Case{Name: "inter-Node, node-2 with node-1's token", From: "pod:client-a", To: "pod:web-b", Proto: "tcp", Sport: 41102}
	b.run(t, forged)
	require.Eventually(t, func() bool { return len(halves(forged.Sport, flowrecord.CorrelationUnpaired)()) > 0 },
		60*time.Second, time.Second, "%s: node-1's half did not arrive unpaired", forged.Name)
	for _, r := range halves(forged.Sport, flowrecord.CorrelationUnpaired)() {
		assert.Equal(t, b.lab.Nodes[0].Name, r.Reporter.NodeName, "%s: a half of node-2 passed", forged.Name)
	}
	assert.Empty(t, halves(forged.Sport, flowrecord.CorrelationPaired)(), "%s: paired with node-2's half", forged.Name)
	assert.Positive(t, counted(t, gw, "otelcol_processor_node_identity_records_refused", "other_node"), "node-2's records not counted refused")
	assert.Zero(t, counted(t, gw, "otelcol_processor_node_identity_records_refused", "no_token")+
		counted(t, gw, "otelcol_processor_node_identity_records_refused", "invalid_token"))
}

// counted sums a collector's counter over its samples whose reason label is
// reason (every sample for "").
func counted(t *testing.T, p interface {
	Metrics(string) (map[string]float64, error)
}, name, reason string) float64 {
	t.Helper()
	m, err := p.Metrics(name)
	require.NoError(t, err)
	var sum float64
	for k, v := range m {
		if reason == "" || strings.Contains(k, `reason="`+reason+`"`) {
			sum += v
		}
	}
	return sum
}
