package policyinsight

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// FlowsQuery puts the Namespace in as a literal that cannot end early.
func TestFlowsQueryNamespace(t *testing.T) {
	q := FlowsQuery("`db`.`flows`", time.Unix(1000, 0), `a' OR 1=1 --\`)
	assert.Contains(t, q, `sourcePodNamespace = 'a\' OR 1=1 --\\'`)
	assert.Contains(t, q, "flowEndSeconds >= toDateTime(1000)")
	assert.NotContains(t, FlowsQuery("`db`.`flows`", time.Unix(1000, 0), ""), "PodNamespace =")
}

// AddRow reads a JSONEachRow line, UInt64s quoted or not, and a row
// without flowtel's endpoint kinds (Antrea's) as a Pod by its name.
func TestAddRow(t *testing.T) {
	var rec Recording
	line := `{"sourceEndpointKind": "pod", "sourceIP": "10.0.0.1", "sourcePodNamespace": "shop", "sourcePodName": "web-1",
		"sourceWorkloadKind": "Deployment", "sourceWorkloadName": "web", "sourceNodeName": "n1", "sourcePodLabels": "{\"app\":\"web\"}",
		"destinationEndpointKind": "", "destinationIP": "10.0.0.2", "destinationPodNamespace": "shop", "destinationPodName": "api-0",
		"destinationWorkloadKind": "", "destinationWorkloadName": "", "destinationNodeName": "n2", "destinationPodLabels": "",
		"protocolIdentifier": 6, "destinationTransportPort": 9000, "connections": "3", "first": "100", "last": 160}`
	var row map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(line), &row))
	require.NoError(t, rec.AddRow(row))
	require.Len(t, rec.Flows(), 1)
	f := rec.Flows()[0]
	assert.Equal(t, "shop/Deployment/web", f.Source.Workload())
	assert.Equal(t, map[string]string{"app": "web"}, LabelsOf(f.Source))
	assert.Equal(t, flowrecord.EndpointPod, f.Destination.Kind)
	assert.Equal(t, "shop/Pod/api-0", f.Destination.Workload())
	assert.Equal(t, netip.MustParseAddr("10.0.0.2"), f.Destination.Address)
	assert.Equal(t, uint8(6), f.Protocol)
	assert.Equal(t, uint16(9000), f.Port)
	assert.Equal(t, uint64(3), f.Connections)
	assert.Equal(t, time.Unix(160, 0), f.Last)

	row["connections"] = json.RawMessage(`"three"`)
	assert.Error(t, rec.AddRow(row))
}
