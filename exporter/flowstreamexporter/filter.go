package flowstreamexporter

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/labels"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// scope is what a stream was opened for: the whole cluster, or one Namespace.
type scope struct {
	clusterWide bool
	namespace   string
}

// inScope reports whether a record reaches the stream: on a Namespace stream,
// when either endpoint is in that Namespace.
func (s scope) inScope(r *flowrecord.Record) bool {
	return s.clusterWide || r.Source.Namespace == s.namespace || r.Destination.Namespace == s.namespace
}

// query is a validated GetFlowsRequest.
type query struct {
	scope    scope
	follow   bool
	since    time.Time
	until    time.Time // top talkers' window end; zero for streams
	maxCount uint64
	filters  []filter
	resume   *pb.ResumeToken // nil: from the oldest record held
}

type filter struct {
	namespaces []string
	podNames   []string
	selector   labels.Selector // nil: no selector
	services   []string
	flowTypes  []flowrecord.FlowType
	prefixes   []netip.Prefix
	from, to   bool // which endpoints the endpoint criteria apply to
}

func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// parseRequest validates a request; errors are INVALID_ARGUMENT naming the field.
func parseRequest(req *pb.GetFlowsRequest) (*query, error) {
	q := &query{follow: req.GetFollow(), maxCount: uint64(req.GetMaxCount())}
	ns := req.GetNamespaces()
	switch {
	case req.GetClusterWide() && len(ns) > 0:
		return nil, invalid("namespaces", "must be empty with cluster_wide (got %q); name one Namespace or set cluster_wide, not both", ns)
	case req.GetClusterWide():
		q.scope.clusterWide = true
	case len(ns) == 0:
		return nil, invalid("namespaces", "one Namespace is required (got none); name the Namespace to observe, or set cluster_wide")
	case len(ns) > 1:
		return nil, invalid("namespaces", "exactly one Namespace per stream (got %d: %q); open one stream per Namespace", len(ns), ns)
	case ns[0] == "":
		return nil, invalid("namespaces[0]", "must not be empty")
	default:
		q.scope.namespace = ns[0]
	}
	if s := req.GetSince(); s != nil {
		if err := s.CheckValid(); err != nil {
			return nil, invalid("since", "%v", err)
		}
		q.since = s.AsTime()
	}
	for i, f := range req.GetFilters() {
		pf, err := parseFilter(fmt.Sprintf("filters[%d]", i), f)
		if err != nil {
			return nil, err
		}
		q.filters = append(q.filters, pf)
	}
	if tok := req.GetResume(); tok != nil {
		if tok.GetStreamEpoch() == "" {
			return nil, invalid("resume.stream_epoch", "must not be empty; send the resume_token of a response unchanged")
		}
		if tok.GetSequenceNumber() < -1 {
			return nil, invalid("resume.sequence_number", "must be -1 or more (got %d)", tok.GetSequenceNumber())
		}
		q.resume = tok
	}
	return q, nil
}

func parseFilter(field string, f *pb.FlowFilter) (filter, error) {
	out := filter{namespaces: f.GetNamespaces(), podNames: f.GetPodNames(), services: f.GetServiceNames()}
	switch f.GetDirection() {
	case pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_BOTH:
		out.from, out.to = true, true
	case pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_FROM:
		out.from = true
		if len(out.services) > 0 {
			return out, invalid(field+".service_names", "cannot be used with direction FROM (got %q); a Service is on the destination side: use TO or BOTH", out.services)
		}
	case pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_TO:
		out.to = true
	default:
		return out, invalid(field+".direction", "unknown value (got %d); use BOTH, FROM or TO", f.GetDirection())
	}
	if s := f.GetPodLabelSelector(); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			return out, invalid(field+".pod_label_selector", "%v (got %q)", err, s)
		}
		out.selector = sel
	}
	for j, t := range f.GetFlowTypes() {
		if t <= pb.FlowType_FLOW_TYPE_UNSPECIFIED || t > pb.FlowType_FLOW_TYPE_FROM_EXTERNAL {
			return out, invalid(fmt.Sprintf("%s.flow_types[%d]", field, j), "unknown flow type (got %d)", t)
		}
		out.flowTypes = append(out.flowTypes, flowrecord.FlowType(t))
	}
	for j, s := range f.GetIps() {
		p, err := parseIPOrCIDR(s)
		if err != nil {
			return out, invalid(fmt.Sprintf("%s.ips[%d]", field, j), "not an IP address or CIDR (got %q)", s)
		}
		out.prefixes = append(out.prefixes, p)
	}
	for j, s := range out.services {
		if s == "" || strings.ContainsAny(s, "/:") {
			return out, invalid(fmt.Sprintf("%s.service_names[%d]", field, j), "must be a bare Service name (got %q)", s)
		}
	}
	return out, nil
}

func parseIPOrCIDR(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// matches reports whether the record (as the client sees it) passes the
// query: end not before since, and every filter (AND), each of whose lists
// matches one of its values (OR).
func (q *query) matches(r *flowrecord.Record) bool {
	if !q.since.IsZero() && r.End.Before(q.since) {
		return false
	}
	for i := range q.filters {
		if !q.filters[i].matches(r) {
			return false
		}
	}
	return true
}

func (f *filter) matches(r *flowrecord.Record) bool {
	if len(f.flowTypes) > 0 && !slices.Contains(f.flowTypes, r.FlowType) {
		return false
	}
	if len(f.services) > 0 && !slices.Contains(f.services, serviceName(r.Service.PortName)) {
		return false
	}
	// The endpoint criteria hold together for one endpoint ("Pod x in
	// Namespace a"), either endpoint with direction BOTH.
	return (f.from && f.endpointMatches(&r.Source)) || (f.to && f.endpointMatches(&r.Destination))
}

func (f *filter) endpointMatches(e *flowrecord.Endpoint) bool {
	if len(f.namespaces) > 0 && !slices.Contains(f.namespaces, e.Namespace) {
		return false
	}
	if len(f.podNames) > 0 && (e.PodName == "" || !slices.Contains(f.podNames, e.PodName)) {
		return false
	}
	if f.selector != nil && (e.PodLabels == nil || !f.selector.Matches(labels.Set(e.PodLabels))) {
		return false
	}
	if len(f.prefixes) > 0 {
		a := e.Address.Unmap()
		if !slices.ContainsFunc(f.prefixes, func(p netip.Prefix) bool { return p.Contains(a) }) {
			return false
		}
	}
	return true
}

// serviceName is the name part of a destinationServicePortName
// ("namespace/name" or "namespace/name:port").
func serviceName(portName string) string {
	_, rest, ok := strings.Cut(portName, "/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ":")
	return name
}
