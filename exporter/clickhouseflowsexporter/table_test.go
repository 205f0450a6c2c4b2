//go:build integration

package clickhouseflowsexporter

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// antreaColumns are the 51 columns Antrea's Flow Aggregator inserts, with the
// types of Antrea's table (Antrea's ClickHouse schema), written
// out here independently of the exporter's own column list.
var antreaColumns = [][2]string{
	{"flowStartSeconds", "DateTime"}, {"flowEndSeconds", "DateTime"},
	{"flowEndSecondsFromSourceNode", "DateTime"}, {"flowEndSecondsFromDestinationNode", "DateTime"},
	{"flowEndReason", "UInt8"}, {"sourceIP", "String"}, {"destinationIP", "String"},
	{"sourceTransportPort", "UInt16"}, {"destinationTransportPort", "UInt16"}, {"protocolIdentifier", "UInt8"},
	{"packetTotalCount", "UInt64"}, {"octetTotalCount", "UInt64"}, {"packetDeltaCount", "UInt64"}, {"octetDeltaCount", "UInt64"},
	{"reversePacketTotalCount", "UInt64"}, {"reverseOctetTotalCount", "UInt64"},
	{"reversePacketDeltaCount", "UInt64"}, {"reverseOctetDeltaCount", "UInt64"},
	{"sourcePodName", "String"}, {"sourcePodNamespace", "String"}, {"sourceNodeName", "String"},
	{"destinationPodName", "String"}, {"destinationPodNamespace", "String"}, {"destinationNodeName", "String"},
	{"destinationClusterIP", "String"}, {"destinationServicePort", "UInt16"}, {"destinationServicePortName", "String"},
	{"ingressNetworkPolicyName", "String"}, {"ingressNetworkPolicyNamespace", "String"}, {"ingressNetworkPolicyRuleName", "String"},
	{"ingressNetworkPolicyRuleAction", "UInt8"}, {"ingressNetworkPolicyType", "UInt8"},
	{"egressNetworkPolicyName", "String"}, {"egressNetworkPolicyNamespace", "String"}, {"egressNetworkPolicyRuleName", "String"},
	{"egressNetworkPolicyRuleAction", "UInt8"}, {"egressNetworkPolicyType", "UInt8"},
	{"tcpState", "String"}, {"flowType", "UInt8"}, {"sourcePodLabels", "String"}, {"destinationPodLabels", "String"},
	{"throughput", "UInt64"}, {"reverseThroughput", "UInt64"}, {"throughputFromSourceNode", "UInt64"},
	{"throughputFromDestinationNode", "UInt64"}, {"reverseThroughputFromSourceNode", "UInt64"},
	{"reverseThroughputFromDestinationNode", "UInt64"}, {"clusterUUID", "String"},
	{"egressName", "String"}, {"egressIP", "String"}, {"egressNodeName", "String"},
}

// flowtelColumns are the ClickHouse columns the field catalogue
// (internal/flowrecord/catalogue/fields.go) assigns to flowtel's own attributes.
var flowtelColumns = []string{
	"sourceEndpointKind", "sourcePodUID", "sourceWorkloadKind", "sourceWorkloadName", "sourceNodeUID",
	"destinationEndpointKind", "destinationPodUID", "destinationWorkloadKind", "destinationWorkloadName", "destinationNodeUID",
	"originalDestinationIP", "originalDestinationPort", "destinationServiceUID", "destinationServiceIP",
	"proxySnatIP", "proxySnatPort", "correlationState",
}

// expectedRow is what a record must read back as, column by column: an
// independent statement of the mapping documented in docs/clickhouse.md.
func expectedRow(r *flowrecord.Record, cluster string) map[string]any {
	epoch := time.Unix(0, 0).UTC()
	sec := func(t time.Time) time.Time {
		if t.IsZero() {
			return epoch
		}
		return t.Truncate(time.Second).UTC()
	}
	str := func(a netip.Addr) string {
		if !a.IsValid() {
			return ""
		}
		return a.String()
	}
	labels := func(m map[string]string) string {
		if m == nil {
			return ""
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%q:%q", k, m[k])
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	endSrc, endDst := epoch, epoch
	var thr, rthr, thrS, thrD, rthrS, rthrD uint64
	if a := r.Aggregation; a != nil {
		endSrc, endDst = sec(a.EndFromSource), sec(a.EndFromDestination)
		thr, rthr, thrS, thrD, rthrS, rthrD = a.Throughput, a.ReverseThroughput, a.ThroughputFromSource,
			a.ThroughputFromDestination, a.ReverseThroughputFromSource, a.ReverseThroughputFromDestination
	} else {
		switch r.Reporter.Side {
		case flowrecord.SideSource:
			endSrc = sec(r.End)
		case flowrecord.SideDestination:
			endDst = sec(r.End)
		case flowrecord.SideBoth:
			endSrc, endDst = sec(r.End), sec(r.End)
		}
	}
	s, d := r.Source, r.Destination
	return map[string]any{
		"flowStartSeconds": sec(r.Start), "flowEndSeconds": sec(r.End),
		"flowEndSecondsFromSourceNode": endSrc, "flowEndSecondsFromDestinationNode": endDst,
		"flowEndReason": uint8(r.EndReason), "sourceIP": str(s.Address), "destinationIP": str(d.Address),
		"sourceTransportPort": s.Port, "destinationTransportPort": d.Port, "protocolIdentifier": r.Protocol,
		"packetTotalCount": r.Stats.PacketTotal, "octetTotalCount": r.Stats.OctetTotal,
		"packetDeltaCount": r.Stats.PacketDelta, "octetDeltaCount": r.Stats.OctetDelta,
		"reversePacketTotalCount": r.ReverseStats.PacketTotal, "reverseOctetTotalCount": r.ReverseStats.OctetTotal,
		"reversePacketDeltaCount": r.ReverseStats.PacketDelta, "reverseOctetDeltaCount": r.ReverseStats.OctetDelta,
		"sourcePodName": s.PodName, "sourcePodNamespace": s.Namespace, "sourceNodeName": s.NodeName,
		"destinationPodName": d.PodName, "destinationPodNamespace": d.Namespace, "destinationNodeName": d.NodeName,
		"destinationClusterIP": str(r.Service.Address), "destinationServicePort": r.Service.Port,
		"destinationServicePortName": r.Service.PortName,
		"ingressNetworkPolicyName":   r.IngressPolicy.Name, "ingressNetworkPolicyNamespace": r.IngressPolicy.Namespace,
		"ingressNetworkPolicyRuleName": r.IngressPolicy.RuleName, "ingressNetworkPolicyRuleAction": uint8(r.IngressPolicy.RuleAction),
		"ingressNetworkPolicyType": uint8(r.IngressPolicy.Type),
		"egressNetworkPolicyName":  r.EgressPolicy.Name, "egressNetworkPolicyNamespace": r.EgressPolicy.Namespace,
		"egressNetworkPolicyRuleName": r.EgressPolicy.RuleName, "egressNetworkPolicyRuleAction": uint8(r.EgressPolicy.RuleAction),
		"egressNetworkPolicyType": uint8(r.EgressPolicy.Type),
		"tcpState":                r.TCPState, "flowType": uint8(r.FlowType),
		"sourcePodLabels": labels(s.PodLabels), "destinationPodLabels": labels(d.PodLabels),
		"throughput": thr, "reverseThroughput": rthr, "throughputFromSourceNode": thrS, "throughputFromDestinationNode": thrD,
		"reverseThroughputFromSourceNode": rthrS, "reverseThroughputFromDestinationNode": rthrD,
		"clusterUUID": cluster, "egressName": r.Egress.Name, "egressIP": str(r.Egress.Address), "egressNodeName": r.Egress.NodeName,

		"sourceEndpointKind": s.Kind.String(), "sourcePodUID": s.PodUID, "sourceWorkloadKind": s.WorkloadKind,
		"sourceWorkloadName": s.WorkloadName, "sourceNodeUID": s.NodeUID,
		"destinationEndpointKind": d.Kind.String(), "destinationPodUID": d.PodUID, "destinationWorkloadKind": d.WorkloadKind,
		"destinationWorkloadName": d.WorkloadName, "destinationNodeUID": d.NodeUID,
		"originalDestinationIP": str(r.OriginalDestinationAddress), "originalDestinationPort": r.OriginalDestinationPort,
		"destinationServiceUID": r.Service.UID, "destinationServiceIP": str(r.Service.Address),
		"proxySnatIP": str(r.ProxySNATAddress), "proxySnatPort": r.ProxySNATPort,
		"correlationState": r.Correlation.String(),
	}
}

// readRows reads every row of the table as column name → value, using the
// driver's scan type of each column.
func readRows(t *testing.T, srv *chserver.Server, table string, columns []string) []map[string]any {
	t.Helper()
	conn := client(t, srv)
	rows, err := conn.Query(context.Background(), fmt.Sprintf("SELECT %s FROM %s", strings.Join(columns, ", "), table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	types := rows.ColumnTypes()
	for rows.Next() {
		ptrs := make([]any, len(types))
		for i, ct := range types {
			ptrs[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		m := make(map[string]any, len(columns))
		for i, name := range columns {
			v := reflect.ValueOf(ptrs[i]).Elem().Interface()
			if tm, ok := v.(time.Time); ok {
				v = tm.UTC()
			}
			m[name] = v
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkRows reads columns of table and checks that it holds one row per
// record (by source port), each with expectedRow's values for cluster
// "cluster-uid-1"; it returns the rows by source port.
func checkRows(t *testing.T, srv *chserver.Server, table string, columns []string, records map[string]*flowrecord.Record) map[uint16]map[string]any {
	t.Helper()
	got := map[uint16]map[string]any{}
	for _, row := range readRows(t, srv, table, columns) {
		got[row["sourceTransportPort"].(uint16)] = row
	}
	if len(got) != len(records) {
		t.Errorf("%s: %d rows, want %d", table, len(got), len(records))
	}
	for name, r := range records {
		row, ok := got[r.Source.Port]
		if !ok {
			t.Errorf("%s: %s: no row", table, name)
			continue
		}
		want := expectedRow(r, "cluster-uid-1")
		if len(want) != len(columns) {
			t.Fatalf("expectedRow has %d columns, the table %d", len(want), len(columns))
		}
		for _, c := range columns {
			if !reflect.DeepEqual(row[c], want[c]) {
				t.Errorf("%s: %s: column %s = %#v, want %#v", table, name, c, row[c], want[c])
			}
		}
	}
	return got
}

// testRecords are the five kinds of record, by name.
func testRecords() map[string]*flowrecord.Record {
	return map[string]*flowrecord.Record{
		"intra-Node": intraNodeRecord(), "inter-Node paired": interNodePairedRecord(),
		"inter-Node unpaired": interNodeUnpairedRecord(), "to-external": toExternalRecord(),
		"from-external": fromExternalRecord(),
	}
}

// The rows read back the same whether the driver encodes the block's own
// column buffers (AppendTo with the clickhouse-go version this module pins:
// the test fails if AppendTo cannot share them) or copies of them (CopyTo,
// AppendTo's fallback for a driver whose columns it does not know).
func TestSharedAndCopiedColumnsAgree(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	records := testRecords()
	var all []*flowrecord.Record
	for _, r := range records {
		all = append(all, r)
	}
	columns := make([]string, len(flowtable.Columns))
	for i, c := range flowtable.Columns {
		columns[i] = c.Name
	}
	ctx := context.Background()
	for _, db := range []string{"shared", "copied"} {
		e, err := newFlowsExporter(testConfig(srv, db), componenttest.NewNopTelemetrySettings())
		if err != nil {
			t.Fatal(err)
		}
		if err := e.start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.shutdown(ctx) })
		block := flowtable.NewBlock(1)
		if bad, err := e.fillBlock(block, logsOf("cluster-uid-1", all...)); bad > 0 {
			t.Fatal(err)
		}
		batch, err := e.conn.PrepareBatch(ctx, e.insertSQL)
		if err != nil {
			t.Fatal(err)
		}
		if db == "shared" {
			if shared, err := block.AppendTo(batch); err != nil || shared != flowtable.SharesDriverColumns {
				t.Fatalf("AppendTo: shared %t, error %v; want shared %t (this build)", shared, err, flowtable.SharesDriverColumns)
			}
		} else if err := block.CopyTo(batch); err != nil {
			t.Fatal(err)
		}
		if err := batch.Send(); err != nil {
			t.Fatal(err)
		}
		checkRows(t, srv, db+".flows", columns, records)
	}
}

func TestEveryColumnReadsBack(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	cfg := testConfig(srv, "flowtel_roundtrip")
	exp, tt := startExporter(t, cfg)

	records := testRecords()
	var all []*flowrecord.Record
	for _, r := range records {
		all = append(all, r)
	}
	if err := exp.ConsumeLogs(context.Background(), logsOf("cluster-uid-1", all...)); err != nil {
		t.Fatal(err)
	}
	conn := client(t, srv)
	waitFor(t, 20*time.Second, "5 rows", func() bool {
		return count(t, conn, "SELECT count() FROM flowtel_roundtrip.flows") == 5
	})

	// The table has Antrea's 51 columns with Antrea's types, timeInserted and
	// trusted, and flowtel's columns: nothing more, nothing less.
	typeOf := map[string]string{}
	rows, err := conn.Query(context.Background(), "SELECT name, type FROM system.columns WHERE database = 'flowtel_roundtrip' AND table = 'flows'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		typeOf[n] = ty
	}
	rows.Close()
	if len(typeOf) != 2+51+len(flowtelColumns) {
		t.Errorf("table has %d columns, want %d", len(typeOf), 2+51+len(flowtelColumns))
	}
	if typeOf["timeInserted"] != "DateTime" || typeOf["trusted"] != "UInt8" {
		t.Errorf("timeInserted %q, trusted %q", typeOf["timeInserted"], typeOf["trusted"])
	}
	columns := make([]string, 0, 51+len(flowtelColumns))
	for _, c := range antreaColumns {
		if typeOf[c[0]] != c[1] {
			t.Errorf("Antrea column %s: type %q, want %q", c[0], typeOf[c[0]], c[1])
		}
		columns = append(columns, c[0])
	}
	for _, c := range flowtelColumns {
		if typeOf[c] == "" {
			t.Errorf("flowtel column %s is missing", c)
		}
		columns = append(columns, c)
	}

	got := checkRows(t, srv, "flowtel_roundtrip.flows", columns, records)

	// A few values spelled out, so the expectation above cannot drift with the code.
	intra, unpaired, fromExt := got[41001], got[41003], got[41005]
	for c, want := range map[string]any{
		"sourcePodLabels": `{"app":"web","tier":"front"}`, "destinationPodLabels": "{}",
		"destinationClusterIP": "10.96.0.20", "flowType": uint8(1), "clusterUUID": "cluster-uid-1",
		"sourceWorkloadKind": "Deployment", "correlationState": "not_required",
	} {
		if intra[c] != want {
			t.Errorf("intra-Node %s = %#v, want %#v", c, intra[c], want)
		}
	}
	for c, want := range map[string]any{
		"sourceEndpointKind": "node", "sourcePodName": "", "sourceNodeName": "node-a", "sourcePodLabels": "",
		"flowEndSecondsFromSourceNode":      time.Date(2026, 12, 2, 10, 0, 30, 0, time.UTC),
		"flowEndSecondsFromDestinationNode": time.Unix(0, 0).UTC(), "throughput": uint64(0),
		"correlationState": "unpaired", "destinationClusterIP": "",
	} {
		if unpaired[c] != want {
			t.Errorf("inter-Node unpaired %s = %#v, want %#v", c, unpaired[c], want)
		}
	}
	for c, want := range map[string]any{"proxySnatIP": "172.18.0.2", "proxySnatPort": uint16(61001), "originalDestinationPort": uint16(30443)} {
		if fromExt[c] != want {
			t.Errorf("from-external %s = %#v, want %#v", c, fromExt[c], want)
		}
	}
	if got[41004]["sourceIP"] != "fd00:10::5" {
		t.Errorf("to-external sourceIP = %#v", got[41004]["sourceIP"])
	}
	n := writtenAfter(t, tt, 5)
	if n != 5 {
		t.Errorf("rows.written = %d, want 5", n)
	}
}
