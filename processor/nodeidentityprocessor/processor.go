package nodeidentityprocessor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/internal/senderauth"
	"github.com/flowtel/flowtel/processor/nodeidentityprocessor/internal/metadata"
)

// The reasons of processor_node_identity_records_refused, as metadata.yaml lists them.
const (
	refusedNoToken      = "no_token"
	refusedInvalidToken = "invalid_token"
	refusedNotAllowed   = "not_allowed"
	refusedUnbound      = "unbound_token"
	refusedOtherNode    = "other_node"
	refusedUndecodable  = "undecodable"
	// refusedNotLocal: the record claims no endpoint of the sender's Node
	// where its side says it has one (and names no other Node instead), or
	// is a relay leg of no connection the sender relayed.
	refusedNotLocal = "not_local"
	// refusedKeyMismatch: the record's correlation key is not its own.
	refusedKeyMismatch = "key_mismatch"
	// refusedNotNodeAddress: the record uses as its Node's own an address
	// (the NodePort address of a DNATed connection from another Node, the
	// SNAT address of a relay leg or ingress half, a node endpoint of the
	// reporter) that is not one of the Node's (decision D1).
	refusedNotNodeAddress = "not_node_address"
	// refusedNodesUnavailable: a record uses an address of the sender's
	// Node, and the gateway's Node cache does not know them yet (not
	// synced, or the Node not seen yet): the request goes back to the
	// sender with a retryable error, not lost.
	refusedNodesUnavailable = "nodes_unavailable"
	// refusedUnavailable: the TokenReview failed (API server unreachable,
	// timing out, 5xx, 429): the records go back to the sender with a
	// retryable error, not lost.
	refusedUnavailable = "review_unavailable"
)

// resourceNodeName is the resource attribute of the reporting Node.
const resourceNodeName = "k8s.node.name"

// logInterval is the least time between two warnings about refused records.
const logInterval = 10 * time.Second

type nodeIdentity struct {
	cfg    *Config
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder
	client clientFunc
	rev    *reviewer
	nodes  nodeAddresses
	// nodeCache is nodes when start made it, shut down with the processor.
	nodeCache *nodeCache

	logMu   sync.Mutex
	lastLog time.Time
}

func newProcessor(set processor.Settings, cfg *Config, client clientFunc) (*nodeIdentity, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &nodeIdentity{cfg: cfg, logger: set.Logger, tel: tel, client: client}, nil
}

func (p *nodeIdentity) start(context.Context, component.Host) error {
	c, err := p.client(p.cfg)
	if err != nil {
		return err
	}
	p.rev = newReviewer(c, p.cfg, p.tel)
	p.nodeCache = startNodeCache(c)
	p.nodes = p.nodeCache
	return nil
}

func (p *nodeIdentity) shutdown(context.Context) error {
	if p.nodeCache != nil {
		p.nodeCache.shutdown()
	}
	p.tel.Shutdown()
	return nil
}

// processLogs passes on the records whose Node is the sender's and refuses
// the others, counted. A request whose sender has no Node (no token, a token
// the API server refuses, or one not bound to a Pod) is refused as a whole,
// with a permanent error: sending it again would not change the answer. A
// request whose token could not be reviewed (the API server gave no answer)
// is refused as a whole with a retryable error, which the otlp receiver
// returns as Unavailable: the node's exporter sends it again.
func (p *nodeIdentity) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	n := int64(ld.LogRecordCount())
	if senderauth.IsAntreaAgent(ctx) {
		// An Antrea agent's records, authenticated by the antrea_flows
		// receiver with its client certificate: agents send no token, and
		// Antrea gives them all one certificate, so no Node can be checked.
		p.tel.ProcessorNodeIdentityRecordsUnchecked.Add(ctx, n)
		return ld, nil
	}
	node, reason, err := p.senderNode(ctx)
	if err != nil {
		p.refuse(ctx, n, reason, err)
		if reason == refusedUnavailable {
			return ld, err
		}
		return ld, consumererror.NewPermanent(err)
	}
	var accepted int64
	refused := map[string]int64{}
	firstClaim := map[string]string{} // by reason
	// The sender's Node's addresses, looked up once, for the first record
	// that uses one; unavailable ends the request with a retryable error.
	var own []netip.Addr
	var ownErr, unavailable error
	looked := false
	ownAddrs := func() ([]netip.Addr, error) {
		if !looked {
			own, ownErr = p.nodes.addresses(ctx, node)
			looked = true
		}
		return own, ownErr
	}
	// Either form a node collector sends: compact (as shipped), of which
	// only what check reads is kept, read where it is in the body
	// (flow_correlation decodes the record), or attributes; each record is
	// done with before the next, so the Decoder reuses its label maps.
	var rec flowrecord.Record
	var dec attrcodec.Decoder
	read := func(lr plog.LogRecord) error {
		if compactcodec.IsCompact(lr) {
			return compactcodec.Peek(lr, &rec, checked)
		}
		return dec.Decode(lr, &rec)
	}
	ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		if v, ok := rl.Resource().Attributes().Get(resourceNodeName); ok && v.Str() != node {
			k := int64(0)
			for i := 0; i < rl.ScopeLogs().Len(); i++ {
				k += int64(rl.ScopeLogs().At(i).LogRecords().Len())
			}
			refused[refusedOtherNode] += k
			firstClaim[refusedOtherNode] = cmpOr(firstClaim[refusedOtherNode], v.Str())
			return true
		}
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				if unavailable != nil {
					return false
				}
				if err := read(lr); err != nil {
					refused[refusedUndecodable]++
					return true
				}
				reason, claim, err := check(&rec, node, ownAddrs)
				if err != nil {
					unavailable = err
					return false
				}
				if reason != "" {
					refused[reason]++
					if firstClaim[reason] == "" {
						// A peeked record's strings are views of its body.
						firstClaim[reason] = strings.Clone(claim)
					}
					return true
				}
				accepted++
				return false
			})
			return sl.LogRecords().Len() == 0
		})
		return rl.ScopeLogs().Len() == 0
	})
	if unavailable != nil {
		// Nothing of the request is judged: all of it comes again.
		p.refuse(ctx, n, refusedNodesUnavailable, unavailable)
		return ld, unavailable
	}
	p.tel.ProcessorNodeIdentityRecordsAccepted.Add(ctx, accepted)
	for reason, k := range refused {
		var err error
		switch reason {
		case refusedOtherNode:
			err = fmt.Errorf("records of Node %s sent by the node collector of Node %s", firstClaim[reason], node)
		case refusedNotLocal:
			err = fmt.Errorf("records of no connection of Node %s sent by its node collector", node)
		case refusedKeyMismatch:
			err = fmt.Errorf("records with another connection's correlation key sent by the node collector of Node %s", node)
		case refusedNotNodeAddress:
			err = fmt.Errorf("records using %s as an address of Node %s, which is not one of its addresses (InternalIP, ExternalIP, podCIDR gateway), sent by its node collector", firstClaim[reason], node)
		default:
			err = fmt.Errorf("records that are not flow records sent by the node collector of Node %s", node)
		}
		p.refuse(ctx, k, reason, err)
	}
	if accepted == 0 && n > 0 {
		return ld, processorhelper.ErrSkipProcessingData
	}
	return ld, nil
}

// checked are the fields of a compact record check reads (flow.key aside,
// which compactcodec.Peek always reads): the reporter, each endpoint's
// address, port, kind and Node, the destination Pod's name
// (Record.IsIngressNodeFromExternal), and what the correlation key and the
// NAT predicates read. A field check reads and this list does not would read
// zero from a compact record: TestCheckCompact compares check on peeked
// records with check on decoded ones.
var checked = compactcodec.Select(
	"flow.reporter.node.name", "flow.reporter.side",
	catalogue.AttrProtocol, "flow.type", "flow.icmp.type", "flow.icmp.code", "flow.icmp.id",
	catalogue.AttrSourceAddress, "source.port", "flow.source.kind", "source.k8s.node.name",
	catalogue.AttrDestinationAddress, "destination.port", "flow.destination.kind", "destination.k8s.node.name", "destination.k8s.pod.name",
	"flow.original_destination.address", "flow.original_destination.port",
	"flow.proxy_snat.address", "flow.proxy_snat.port",
)

// check says why node's collector may not send r ("" when it may), and
// the Node (or, for not_node_address, the address) it claimed instead of
// node's, if any. own gives node's addresses (decision D1); it is called only
// for a record that uses one, and its error (the addresses are not known
// yet) is check's: the record is not judged. Every endpoint the record
// claims is checked, as k8s_flow decides a record's side
// (processor/k8sflowprocessor, classify.go):
//
//   - the reporter must be node;
//   - a source half claims its source: a Pod or Node endpoint on node, or an
//     external client whose destination node DNATed to a Pod or Node (the
//     ingress Node of a from-external connection);
//   - a destination half claims its destination, on node, or a connection
//     node DNATed for a client on another Node (it reached one of node's
//     front ends, a NodePort, whatever endpoint node chose);
//   - an intra-Node record (both) claims both;
//   - a relay leg is the onward leg of a connection node DNATed for a client
//     on another Node to an endpoint on a third Node (k8s_flow's relayLeg);
//   - a record with no side must have an endpoint on node;
//   - the addresses the record uses as node's own must be node's: a Node
//     endpoint of node; the pre-DNAT destination of a connection from a
//     client on another Node that node DNATed (a destination half, keyed by
//     it, or a relay leg: the NodePort address the client sent to); the
//     SNAT address of a relay leg, or of the ingress Node's source half
//     (keyed by it: node's masquerade, towards the endpoint's Node);
//   - the correlation key, when sent, must be the record's own
//     (flowrecord.CorrelationKey): flow_correlation pairs by the key it is
//     sent, so a made-up key would pair with, or as a relay leg fold away,
//     a connection between other Nodes.
func check(r *flowrecord.Record, node string, own func() ([]netip.Addr, error)) (reason, claim string, err error) {
	if r.Reporter.NodeName != node {
		return refusedOtherNode, cmpOr(r.Reporter.NodeName, "(none)"), nil
	}
	src, dst := &r.Source, &r.Destination
	local := func(e *flowrecord.Endpoint) bool { return e.NodeName == node }
	// ingress: an external client's connection node DNATed into the cluster.
	ingress := src.Kind == flowrecord.EndpointExternal && dst.Kind.InCluster() && r.DNATed()
	// relayed: a connection from a client on another Node that node DNATed.
	relayed := src.Kind.InCluster() && src.NodeName != "" && src.NodeName != node && r.DNATed()
	var ok bool
	var claimed *flowrecord.Endpoint // the endpoint that should have been node's
	switch r.Reporter.Side {
	case flowrecord.SideSource:
		ok, claimed = local(src) || ingress, src
	case flowrecord.SideDestination:
		ok, claimed = local(dst) || relayed, dst
	case flowrecord.SideBoth:
		switch {
		case !local(src) && !ingress:
			claimed = src
		case !local(dst):
			claimed = dst
		default:
			ok = true
		}
	case flowrecord.SideRelay:
		ok = relayed && dst.Kind.InCluster() && dst.NodeName != "" && !local(dst)
		if !ok {
			return refusedNotLocal, "", nil
		}
	default:
		ok, claimed = local(src) || local(dst), src
		if claimed.NodeName == "" {
			claimed = dst
		}
	}
	if !ok {
		if claimed.NodeName != "" && claimed.NodeName != node {
			return refusedOtherNode, claimed.NodeName, nil
		}
		return refusedNotLocal, "", nil
	}
	// The addresses r uses as node's own (at most four).
	var uses [4]netip.Addr
	used := uses[:0]
	for _, e := range []*flowrecord.Endpoint{src, dst} {
		if e.Kind == flowrecord.EndpointNode && local(e) {
			used = append(used, e.Address)
		}
	}
	side := r.Reporter.Side
	if relayed && (side == flowrecord.SideDestination || side == flowrecord.SideRelay) {
		used = append(used, r.OriginalDestinationAddress)
	}
	if r.KeyedBySNAT() && (side == flowrecord.SideRelay || ingress) {
		used = append(used, r.ProxySNATAddress)
	}
	if len(used) > 0 {
		addrs, err := own()
		if err != nil {
			return "", "", err
		}
		for _, a := range used {
			if !slices.Contains(addrs, a.Unmap()) {
				return refusedNotNodeAddress, a.Unmap().String(), nil
			}
		}
	}
	if r.Key != "" && r.Key != r.CorrelationKey() {
		return refusedKeyMismatch, "", nil
	}
	return "", "", nil
}

// senderNode is the Node of the request's sender, from its bearer token.
func (p *nodeIdentity) senderNode(ctx context.Context) (node, reason string, err error) {
	token := bearer(client.FromContext(ctx).Metadata.Get("authorization"))
	if token == "" {
		return "", refusedNoToken, errors.New("no bearer token: the gateway takes flow records only from node collectors that send their projected ServiceAccount token (the otlp receiver needs include_metadata: true)")
	}
	return p.rev.node(ctx, token)
}

// bearer is the token of an Authorization header's "Bearer <token>".
func bearer(values []string) string {
	for _, v := range values {
		if scheme, token, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") {
			return strings.TrimSpace(token)
		}
	}
	return ""
}

// refuse counts n refused records and logs it at most once per logInterval.
func (p *nodeIdentity) refuse(ctx context.Context, n int64, reason string, err error) {
	p.tel.ProcessorNodeIdentityRecordsRefused.Add(ctx, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason))))
	p.logMu.Lock()
	now := time.Now()
	log := now.Sub(p.lastLog) >= logInterval
	if log {
		p.lastLog = now
	}
	p.logMu.Unlock()
	if log {
		p.logger.Warn("flow records refused", zap.String("reason", reason), zap.Int64("records", n), zap.Error(err))
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
