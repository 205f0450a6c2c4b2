package flowstreamexporter

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Talkers a GetTopTalkers answers with: by default, and at most.
const (
	defaultTopLimit = 10
	maxTopLimit     = 1000
)

// topService implements FlowTopService: the flow history's top talkers,
// aggregated in ClickHouse, scoped and disclosed as the flow stream.
type topService struct {
	pb.UnimplementedFlowTopServiceServer
	stream *service // authentication, authorization, history
}

// talkerKey is a group as ClickHouse returns it, before disclosure.
type talkerKey struct {
	srcNS, srcName, dstNS, dstName string
	denied                         bool
}

// GetTopTalkers authenticates and authorizes as GetFlows (verb list), then
// sums the window's flows in ClickHouse per pair and discloses each pair's
// endpoints at the caller's tier in their Namespace.
func (t *topService) GetTopTalkers(ctx context.Context, req *pb.GetTopTalkersRequest) (*pb.GetTopTalkersResponse, error) {
	s := t.stream
	if s.history == nil {
		return nil, status.Error(codes.Unimplemented, "top talkers need the flow history: this gateway has no history.endpoint (ClickHouse) configured")
	}
	u, err := s.access.authenticate(ctx)
	if err != nil {
		return nil, s.reject(ctx, err)
	}
	q, group, limit, err := parseTopRequest(req)
	if err != nil {
		return nil, s.reject(ctx, err)
	}
	if err := s.access.authorizeScope(ctx, u, q.scope, verbList); err != nil {
		if errors.Is(err, errNoDecision) {
			return nil, s.reject(ctx, status.Error(codes.Unavailable, "cannot authorize the request now (Kubernetes API unreachable): retry"))
		}
		return nil, s.reject(ctx, err)
	}
	v := &viewer{access: s.access, user: u, scope: q.scope, verb: verbList}
	return s.history.topTalkers(ctx, q, v, group, req.GetOrderBy(), limit)
}

// parseTopRequest validates a request: its scope and window as a query
// (GetFlowsRequest's rules), what a talker is, and how many.
func parseTopRequest(req *pb.GetTopTalkersRequest) (*query, pb.TopGroupBy, int, error) {
	if req.GetSince() == nil {
		return nil, 0, 0, invalid("since", "is required: the start of the window")
	}
	q, err := parseRequest(&pb.GetFlowsRequest{ClusterWide: req.GetClusterWide(), Namespaces: req.GetNamespaces(), Since: req.GetSince()})
	if err != nil {
		return nil, 0, 0, err
	}
	if u := req.GetUntil(); u != nil {
		if err := u.CheckValid(); err != nil {
			return nil, 0, 0, invalid("until", "%v", err)
		}
		if !u.AsTime().After(q.since) {
			return nil, 0, 0, invalid("until", "must be after since (got %s, since %s)", u.AsTime().Format(time.RFC3339), q.since.Format(time.RFC3339))
		}
		q.until = u.AsTime()
	}
	g := req.GetGroupBy()
	if _, ok := pb.TopGroupBy_name[int32(g)]; !ok {
		return nil, 0, 0, invalid("group_by", "unknown value (got %d); use WORKLOAD, SERVICE or NAMESPACE", g)
	}
	if _, ok := pb.TopOrderBy_name[int32(req.GetOrderBy())]; !ok {
		return nil, 0, 0, invalid("order_by", "unknown value (got %d); use BYTES or CONNECTIONS", req.GetOrderBy())
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultTopLimit
	}
	if limit > maxTopLimit {
		return nil, 0, 0, invalid("limit", "at most %d (got %d)", maxTopLimit, limit)
	}
	return q, g, limit, nil
}

// endpointName is the SQL of an endpoint's name in a workload group: its
// workload, else its Pod, else its address.
func endpointName(side string) string {
	return fmt.Sprintf("if(%[1]sWorkloadName != '', concat(%[1]sWorkloadKind, '/', %[1]sWorkloadName), if(%[1]sPodName != '', concat('Pod/', %[1]sPodName), %[1]sIP))", side)
}

// topSQL sums the window's rows per group, largest first, at most limit groups.
func topSQL(database, table string, q *query, group pb.TopGroupBy, order pb.TopOrderBy, limit int) string {
	srcName, dstName := endpointName("source"), endpointName("destination")
	where := historyWhere(q, q.since.Unix())
	if !q.until.IsZero() {
		where = append(where, fmt.Sprintf("flowEndSeconds < toDateTime(%d)", q.until.Unix()))
	}
	switch group {
	case pb.TopGroupBy_TOP_GROUP_BY_NAMESPACE:
		srcName, dstName = "''", "''"
	case pb.TopGroupBy_TOP_GROUP_BY_SERVICE:
		dstName = "destinationServicePortName"
		where = append(where, "destinationServicePortName != ''")
	}
	deny := fmt.Sprintf("(ingressNetworkPolicyRuleAction IN (%[1]d, %[2]d) OR egressNetworkPolicyRuleAction IN (%[1]d, %[2]d))",
		flowrecord.RuleActionDrop, flowrecord.RuleActionReject)
	orderBy := "bytes"
	if order == pb.TopOrderBy_TOP_ORDER_BY_CONNECTIONS {
		orderBy = "connections"
	}
	return fmt.Sprintf(`SELECT sourcePodNamespace, %s AS src, destinationPodNamespace, %s AS dst, %s AS denied,
	sum(octetDeltaCount + reverseOctetDeltaCount) AS bytes, sum(packetDeltaCount + reversePacketDeltaCount) AS packets,
	uniq(sourceIP, sourceTransportPort, destinationIP, destinationTransportPort, protocolIdentifier, flowStartSeconds) AS connections
FROM `+"`%s`.`%s`"+`%s
GROUP BY sourcePodNamespace, src, destinationPodNamespace, dst, denied
ORDER BY %s DESC LIMIT %d`, srcName, dstName, deny, database, table, whereClause(where), orderBy, limit)
}

// topTalkers runs topSQL and discloses each group to the viewer.
func (h *history) topTalkers(ctx context.Context, q *query, v *viewer, group pb.TopGroupBy, order pb.TopOrderBy, limit int) (*pb.GetTopTalkersResponse, error) {
	qctx, cancel := context.WithTimeout(ctx, h.cfg.QueryTimeout)
	defer cancel()
	rows, err := h.conn.Query(qctx, topSQL(h.cfg.Database, h.cfg.Table, q, group, order, h.cfg.MaxRows+1))
	if err != nil {
		return nil, h.failed(ctx, err)
	}
	defer rows.Close()
	resp := &pb.GetTopTalkersResponse{}
	merged := map[talkerKey]*pb.TopTalker{}
	for rows.Next() {
		if resp.Groups == uint64(h.cfg.MaxRows) {
			resp.Truncated = true
			break
		}
		resp.Groups++
		var k talkerKey
		var denied uint8
		var bytes, packets, conns uint64
		if err := rows.Scan(&k.srcNS, &k.srcName, &k.dstNS, &k.dstName, &denied, &bytes, &packets, &conns); err != nil {
			return nil, h.failed(ctx, err)
		}
		k.denied = denied != 0
		d := v.disclose(ctx, k)
		if !v.scope.clusterWide && k.srcNS != v.scope.namespace && k.dstNS != v.scope.namespace {
			continue // SQL selected it by scope already; kept as a guard
		}
		t := merged[d]
		if t == nil {
			t = &pb.TopTalker{SourceNamespace: d.srcNS, SourceName: d.srcName, DestinationNamespace: d.dstNS, DestinationName: d.dstName,
				SourceDisclosure: pb.EndpointDisclosure(v.tier(ctx, k.srcNS)), DestinationDisclosure: pb.EndpointDisclosure(v.tier(ctx, k.dstNS))}
			merged[d] = t
		}
		t.Bytes += bytes
		t.Packets += packets
		t.Connections += conns
	}
	if err := rows.Err(); err != nil {
		return nil, h.failed(ctx, err)
	}
	for _, t := range merged {
		resp.Talkers = append(resp.Talkers, t)
	}
	metric := func(t *pb.TopTalker) uint64 {
		if order == pb.TopOrderBy_TOP_ORDER_BY_CONNECTIONS {
			return t.Connections
		}
		return t.Bytes
	}
	slices.SortFunc(resp.Talkers, func(a, b *pb.TopTalker) int {
		if c := -compareUint(metric(a), metric(b)); c != 0 {
			return c
		}
		return strings.Compare(a.SourceNamespace+"/"+a.SourceName+">"+a.DestinationNamespace+"/"+a.DestinationName,
			b.SourceNamespace+"/"+b.SourceName+">"+b.DestinationNamespace+"/"+b.DestinationName)
	})
	if len(resp.Talkers) > limit {
		resp.Talkers = resp.Talkers[:limit]
	}
	return resp, nil
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// disclose withholds what the viewer may not see of a group, as redact
// does of a record: a name at the Flow tier (and the Service, which follows
// the destination), and a Namespace too on a denied connection. An address
// (the name of an endpoint without Pod) is not withheld, as in a record.
func (v *viewer) disclose(ctx context.Context, k talkerKey) talkerKey {
	withhold := func(ns, name *string) {
		if _, err := netip.ParseAddr(*name); err != nil {
			*name = ""
		}
		if k.denied {
			*ns = ""
		}
	}
	if v.tier(ctx, k.srcNS) >= tierFlow {
		withhold(&k.srcNS, &k.srcName)
	}
	if v.tier(ctx, k.dstNS) >= tierFlow {
		withhold(&k.dstNS, &k.dstName)
	}
	k.denied = false // not shown: groups differing only by it are summed
	return k
}
