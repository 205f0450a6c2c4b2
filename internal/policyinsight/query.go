package policyinsight

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// endCols are one end's columns the evaluation reads, in the query's order.
var endCols = []string{"EndpointKind", "IP", "PodNamespace", "PodName", "WorkloadKind", "WorkloadName", "NodeName", "PodLabels"}

// FlowsQuery is the query flowctl policy (and the testbed) sends to
// ClickHouse's HTTP interface for the recorded flows: the connections of
// table (a quoted `db`.`table`) that ended at or after from, with either
// end in namespace ("" every Namespace), grouped by their two ends,
// protocol and destination port (the Pod's, after DNAT: what policies
// match), with their count and time span, one JSON object per line
// (AddRow reads each). It runs on ClickHouse 18.16 as flowctl map's does.
func FlowsQuery(table string, from time.Time, namespace string) string {
	var cols []string
	for _, side := range []string{"source", "destination"} {
		for _, c := range endCols {
			cols = append(cols, side+c)
		}
	}
	cols = append(cols, "protocolIdentifier", "destinationTransportPort")
	where := fmt.Sprintf("flowEndSeconds >= toDateTime(%d)", from.Unix())
	if namespace != "" {
		where += fmt.Sprintf(" AND (sourcePodNamespace = %[1]s OR destinationPodNamespace = %[1]s)", quote(namespace))
	}
	group := strings.Join(cols, ", ")
	return fmt.Sprintf(`SELECT %s,
    uniqExact(sourceIP, sourceTransportPort, destinationIP, destinationTransportPort, protocolIdentifier) AS connections,
    toUInt64(toUnixTimestamp(min(flowStartSeconds))) AS first,
    toUInt64(toUnixTimestamp(max(flowEndSeconds))) AS last
FROM %s
WHERE %s
GROUP BY %s
FORMAT JSONEachRow`, group, table, where, group)
}

// quote is a ClickHouse string literal of s.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// AddRow adds one row of FlowsQuery's result.
func (r *Recording) AddRow(row map[string]json.RawMessage) error {
	var errs []error
	str := func(k string) string {
		var s string
		errs = append(errs, json.Unmarshal(row[k], &s))
		return s
	}
	num := func(k string) uint64 {
		// A UInt64 is quoted in JSONEachRow by default, not when
		// output_format_json_quote_64bit_integers is off.
		v, err := strconv.ParseUint(strings.Trim(string(row[k]), `"`), 10, 64)
		errs = append(errs, err)
		return v
	}
	end := func(side string) Endpoint {
		e := Endpoint{Namespace: str(side + "PodNamespace"), Pod: str(side + "PodName"),
			WorkloadKind: str(side + "WorkloadKind"), WorkloadName: str(side + "WorkloadName"), Node: str(side + "NodeName"),
			Labels: str(side + "PodLabels")}
		e.Address, _ = netip.ParseAddr(str(side + "IP"))
		kind := str(side + "EndpointKind")
		switch i := slices.Index(flowrecord.EndpointKind(0).Names(), kind); {
		case kind != "" && i > 0:
			e.Kind = flowrecord.EndpointKind(i)
		case e.Pod != "": // a row written without flowtel's columns (Antrea's)
			e.Kind = flowrecord.EndpointPod
		default:
			e.Kind = flowrecord.EndpointExternal
		}
		return e
	}
	src, dst := end("source"), end("destination")
	proto, port, n := num("protocolIdentifier"), num("destinationTransportPort"), num("connections")
	first, last := time.Unix(int64(num("first")), 0), time.Unix(int64(num("last")), 0)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.Add(src, dst, uint8(proto), uint16(port), n, first, last)
	return nil
}
