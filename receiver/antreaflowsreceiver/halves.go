package antreaflowsreceiver

import (
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// This file is where an agent's record, read into flowtel's record model,
// becomes a record half, and its encoding.

// Reasons a decoded record is refused (refusal_reason in metadata.yaml).
const (
	reasonMalformedMessage = "malformed_message"
	reasonUnknownTemplate  = "unknown_template"
	reasonMalformedRecord  = "malformed_record"
	reasonNoNode           = "no_node"
	reasonNoEnd            = "no_end"
	reasonTemplateLimit    = "template_limit"
	reasonExporterLimit    = "exporter_limit"
	reasonOversizeRequest  = "oversize_request"
)

// refusal is a record the receiver does not turn into a half, and why.
type refusal struct {
	reason string
	err    error
}

func (r *refusal) Error() string { return r.reason + ": " + r.err.Error() }

func refuse(reason, msg string) *refusal { return &refusal{reason: reason, err: errors.New(msg)} }

// agentRecord is one flow record as an Antrea agent sent it, whichever the
// transport: the catalogue fields it carries, read straight into a Record
// through the catalogue (IPFIX: the IE table of ipfixfields.go; gRPC:
// flowpb's mapping), and the observation domain it came in. The receiver
// has no field list of its own: a field the catalogue gives an IE the
// receiver reads reaches the half toHalf makes of it. Zero values are "not
// sent"; Observed is when the agent sent it (the IPFIX message's export
// time, gRPC's ipfix.export_time), zero for the receiver's clock.
type agentRecord struct {
	flowrecord.Record
	// domain is the observation domain (IPFIX message header, gRPC
	// ipfix.observation_domain_id): which Node sent it (reportingNode).
	domain uint32
}

// toHalf turns what an agent sent into the half of the connection its Node
// reports, keyed as flowtel's node collectors key theirs, in place; now is
// its Observed time when the agent did not say when it sent it.
//
// The agent names its own Node as the Node of each endpoint whose Pod is
// local, so the names it sent say which half it reports, as flowtel's own
// reporter says (see k8s_flow's reported side): both endpoints local, or the
// ingress Node of a from-external flow with a local endpoint, is both halves;
// the source's Node the source half; the destination's the destination
// half. The one half Antrea sends without a Node name is the ingress Node's
// half of a from-external flow it SNATed towards a remote Pod: it is the
// source half, its Node unnamed (the agent does not say it). Anything else
// names no Node and is refused.
func toHalf(a *agentRecord, now time.Time, nodes *nodeAddrs) *refusal {
	r := &a.Record
	if r.End.IsZero() {
		return refuse(reasonNoEnd, "the record has no end time (flowEndSeconds, end_ts)")
	}
	if r.FlowType > flowrecord.FlowTypeFromExternal {
		return refuse(reasonMalformedRecord, "flow type over 4")
	}
	if r.IngressPolicy.Type > flowrecord.PolicyTypeK8sClusterNetworkPolicy || r.EgressPolicy.Type > flowrecord.PolicyTypeK8sClusterNetworkPolicy {
		return refuse(reasonMalformedRecord, "network policy type over 4")
	}
	if r.IngressPolicy.RuleAction > flowrecord.RuleActionReject || r.EgressPolicy.RuleAction > flowrecord.RuleActionReject {
		return refuse(reasonMalformedRecord, "network policy rule action over 3")
	}
	if r.EndReason > flowrecord.EndReasonLackOfResources {
		return refuse(reasonMalformedRecord, "flow end reason over 5")
	}
	if !r.Source.Address.IsValid() || !r.Destination.Address.IsValid() {
		return refuse(reasonMalformedRecord, "the record has no source or destination address")
	}
	reporter, err := reportingNode(a)
	if err != nil {
		return err
	}

	if r.Observed.IsZero() {
		r.Observed = now
	}
	if r.Source.PodName != "" {
		r.Source.Kind = flowrecord.EndpointPod
	}
	if r.Destination.PodName != "" {
		r.Destination.Kind = flowrecord.EndpointPod
	}
	if !r.ProxySNATAddress.IsValid() {
		r.ProxySNATPort = 0
	}
	// The pre-DNAT destination is the Service address the agent resolved;
	// without one no DNAT happened on its Node (flowtel's convention: the
	// endpoint itself).
	r.OriginalDestinationAddress, r.OriginalDestinationPort = r.Destination.Address, r.Destination.Port
	if r.Service.Address.IsValid() {
		r.OriginalDestinationAddress, r.OriginalDestinationPort = r.Service.Address, r.Service.Port
	}
	srcLocal, dstLocal := reporter != "" && r.Source.NodeName == reporter, reporter != "" && r.Destination.NodeName == reporter
	// Decision D1: an address of the reporting Node itself (its podCIDR
	// gateway address, InternalIP or ExternalIP) is a Node endpoint of that
	// Node, on its side of the connection. The agent cannot tell its own
	// gateway from another Node's, so a host-network process or the kubelet
	// talking to a local Pod arrives as inter-Node with only the destination
	// named (Antrea issue #8260), and a local Pod calling its Node's address
	// as to-external; both are intra-Node, and no other Node reports them.
	if !srcLocal && r.Source.PodName == "" {
		if uid, ok := nodes.own(reporter, r.Source.Address); ok {
			r.Source.Kind, r.Source.NodeName, r.Source.NodeUID = flowrecord.EndpointNode, reporter, uid
			srcLocal = true
		}
	}
	if !dstLocal && r.Destination.PodName == "" {
		if uid, ok := nodes.own(reporter, r.Destination.Address); ok {
			r.Destination.Kind, r.Destination.NodeName, r.Destination.NodeUID = flowrecord.EndpointNode, reporter, uid
			dstLocal = true
		}
	}
	if srcLocal && dstLocal {
		r.FlowType = flowrecord.FlowTypeIntraNode
	}
	switch r.FlowType {
	case flowrecord.FlowTypeFromExternal:
		if r.Source.Kind == flowrecord.EndpointUnknown {
			r.Source.Kind = flowrecord.EndpointExternal
		}
	case flowrecord.FlowTypeToExternal:
		if r.Destination.Kind == flowrecord.EndpointUnknown {
			r.Destination.Kind = flowrecord.EndpointExternal
		}
	}

	ingress := r.FlowType == flowrecord.FlowTypeFromExternal && (r.DNATed() || r.ProxySNATAddress.IsValid())
	var side flowrecord.Side
	switch {
	case (srcLocal || ingress) && dstLocal:
		side = flowrecord.SideBoth
	case srcLocal || ingress && r.ProxySNATAddress.IsValid():
		side = flowrecord.SideSource
	case dstLocal:
		side = flowrecord.SideDestination
	default:
		return refuse(reasonNoNode, "the record names no Node (sourceNodeName, destinationNodeName) and is not the ingress Node's half of an SNATed from-external flow")
	}
	r.Reporter = flowrecord.Reporter{NodeName: reporter, Side: side}
	r.Key = r.CorrelationKey()
	return nil
}

// reportingNode is the Node that sent the record. Antrea's agents set their
// observation domain to the FNV-1 hash of their Node's name and name only
// their own Node, so the Node named whose hash is the domain sent it. A
// domain that is no named Node's says the sender is another Node, whose
// name the record does not carry (the ingress Node of a from-external flow,
// from an exporter that knows remote Pods: flowtel's ipfix exporter in the
// agent layout). Without a domain (0: a gRPC flow that leaves it unset) the
// one Node named sent it; a record naming two Nodes is then refused.
func reportingNode(a *agentRecord) (string, *refusal) {
	src, dst := a.Source.NodeName, a.Destination.NodeName
	switch d := a.domain; {
	case src != "" && d == nodeDomain(src):
		return src, nil
	case dst != "" && d == nodeDomain(dst):
		return dst, nil
	case d != 0:
		return "", nil
	case src == "" || src == dst:
		return dst, nil
	case dst == "":
		return src, nil
	}
	return "", refuse(reasonMalformedRecord, fmt.Sprintf("the record names two Nodes (%s, %s) and no observation domain to tell which sent it (FNV-1 of the Node name, as Antrea's agents set it)",
		src, dst))
}

// nodeDomain is an Antrea agent's observation domain: the 32-bit FNV-1 hash
// (not FNV-1a) of its Node's name.
func nodeDomain(node string) uint32 {
	h := fnv.New32()
	_, _ = h.Write([]byte(node))
	return h.Sum32()
}

// batch collects record halves into one plog.Logs in the form flowtel's node
// collectors send: a resource per reporting Node (k8s.node.name, and
// k8s.cluster.uid when configured), one LogRecord per half.
type batch struct {
	logs       plog.Logs
	byNode     map[string]plog.LogRecordSlice
	clusterUID string
	nodes      *nodeAddrs
	scope      string
	version    string
	encode     func(*flowrecord.Record, plog.LogRecord) // the configured form
	n          int
}

func newBatch(clusterUID, scope, version string, nodes *nodeAddrs, encode func(*flowrecord.Record, plog.LogRecord)) *batch {
	return &batch{clusterUID: clusterUID, scope: scope, version: version, nodes: nodes, encode: encode}
}

// add turns a into its half (in place) and appends it, or returns why it
// is refused.
func (b *batch) add(a *agentRecord, now time.Time) *refusal {
	if ref := toHalf(a, now, b.nodes); ref != nil {
		return ref
	}
	if b.n == 0 {
		b.logs = plog.NewLogs()
		b.byNode = make(map[string]plog.LogRecordSlice, 1)
	}
	node := a.Reporter.NodeName
	lrs, ok := b.byNode[node]
	if !ok {
		rl := b.logs.ResourceLogs().AppendEmpty()
		if node != "" {
			rl.Resource().Attributes().PutStr(catalogue.ResourceNodeName, node)
		}
		if b.clusterUID != "" {
			rl.Resource().Attributes().PutStr(catalogue.ResourceClusterUID, b.clusterUID)
		}
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(b.scope)
		sl.Scope().SetVersion(b.version)
		lrs = sl.LogRecords()
		b.byNode[node] = lrs
	}
	b.encode(&a.Record, lrs.AppendEmpty())
	b.n++
	return nil
}

// take returns the logs collected and their count, and empties the batch.
func (b *batch) take() (plog.Logs, int) {
	l, n := b.logs, b.n
	b.logs, b.byNode, b.n = plog.Logs{}, nil, 0
	return l, n
}
