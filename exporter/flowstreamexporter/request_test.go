package flowstreamexporter

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

func TestParseRequestInvalid(t *testing.T) {
	ns := []string{"ns-a"}
	from := pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_FROM
	tests := []struct {
		name  string
		req   *pb.GetFlowsRequest
		field string
	}{
		{"two namespaces", &pb.GetFlowsRequest{Namespaces: []string{"ns-a", "ns-b"}}, "namespaces: exactly one Namespace per stream (got 2"},
		{"no scope", &pb.GetFlowsRequest{}, "namespaces: one Namespace is required (got none)"},
		{"empty namespace", &pb.GetFlowsRequest{Namespaces: []string{""}}, "namespaces[0]: must not be empty"},
		{"both scopes", &pb.GetFlowsRequest{ClusterWide: true, Namespaces: ns}, "namespaces: must be empty with cluster_wide"},
		{"FROM with services", &pb.GetFlowsRequest{Namespaces: ns, Filters: []*pb.FlowFilter{{}, {Direction: from, ServiceNames: []string{"api"}}}},
			"filters[1].service_names: cannot be used with direction FROM"},
		{"bad selector", &pb.GetFlowsRequest{Namespaces: ns, Filters: []*pb.FlowFilter{{PodLabelSelector: "app in (a"}}}, "filters[0].pod_label_selector: "},
		{"bad ip", &pb.GetFlowsRequest{Namespaces: ns, Filters: []*pb.FlowFilter{{Ips: []string{"10.0.0.1", "10.0.0/8"}}}}, `filters[0].ips[1]: not an IP address or CIDR (got "10.0.0/8")`},
		{"bad flow type", &pb.GetFlowsRequest{Namespaces: ns, Filters: []*pb.FlowFilter{{FlowTypes: []pb.FlowType{0}}}}, "filters[0].flow_types[0]: unknown flow type (got 0)"},
		{"bad direction", &pb.GetFlowsRequest{Namespaces: ns, Filters: []*pb.FlowFilter{{Direction: 7}}}, "filters[0].direction: unknown value (got 7)"},
		{"qualified service", &pb.GetFlowsRequest{Namespaces: ns, Filters: []*pb.FlowFilter{{ServiceNames: []string{"ns-a/api"}}}}, "filters[0].service_names[0]: must be a bare Service name"},
		{"bad since", &pb.GetFlowsRequest{Namespaces: ns, Since: &timestamppb.Timestamp{Nanos: -1}}, "since: "},
		{"resume without epoch", &pb.GetFlowsRequest{Namespaces: ns, Resume: &pb.ResumeToken{SequenceNumber: 3}}, "resume.stream_epoch: must not be empty"},
		{"resume before the first record", &pb.GetFlowsRequest{Namespaces: ns, Resume: &pb.ResumeToken{StreamEpoch: "e", SequenceNumber: -2}}, "resume.sequence_number: must be -1 or more (got -2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseRequest(tt.req)
			st, ok := status.FromError(err)
			require.True(t, ok, "%v", err)
			require.Equal(t, codes.InvalidArgument, st.Code())
			require.Contains(t, st.Message(), tt.field)
		})
	}
}

func TestFilters(t *testing.T) {
	web := podRecord("ns-a", "web", "ns-b", "api") // ns-a/web → ns-b/api via Service api-svc
	db := podRecord("ns-b", "api", "ns-c", "db")   // ns-b/api → ns-c/db
	ext := podRecord("ns-a", "web", "", "")        // ns-a/web → outside
	ext.Destination = flowrecord.Endpoint{Address: netip.MustParseAddr("203.0.113.9"), Port: 443, Kind: flowrecord.EndpointExternal}
	ext.Service, ext.FlowType = flowrecord.Service{}, flowrecord.FlowTypeToExternal
	all := []*flowrecord.Record{web, db, ext}
	to := pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_TO
	from := pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_FROM
	tests := []struct {
		name    string
		filters []*pb.FlowFilter
		want    []*flowrecord.Record
	}{
		{"none", nil, all},
		{"namespace either side", []*pb.FlowFilter{{Namespaces: []string{"ns-b"}}}, []*flowrecord.Record{web, db}},
		{"namespace FROM", []*pb.FlowFilter{{Namespaces: []string{"ns-b"}, Direction: from}}, []*flowrecord.Record{db}},
		{"namespace TO", []*pb.FlowFilter{{Namespaces: []string{"ns-b"}, Direction: to}}, []*flowrecord.Record{web}},
		{"OR within a list", []*pb.FlowFilter{{PodNames: []string{"db", "web"}, Direction: to}}, []*flowrecord.Record{db}},
		{"OR of pods, either side", []*pb.FlowFilter{{PodNames: []string{"db", "web"}}}, all},
		{"AND across filters", []*pb.FlowFilter{{Namespaces: []string{"ns-a"}}, {FlowTypes: []pb.FlowType{pb.FlowType_FLOW_TYPE_TO_EXTERNAL}}}, []*flowrecord.Record{ext}},
		{"one endpoint meets all criteria", []*pb.FlowFilter{{Namespaces: []string{"ns-a"}, PodNames: []string{"api"}}}, nil},
		{"label selector", []*pb.FlowFilter{{PodLabelSelector: "app in (db, nothing)"}}, []*flowrecord.Record{db}},
		{"label selector without labels", []*pb.FlowFilter{{PodLabelSelector: "!app", Direction: to}}, nil},
		{"service name", []*pb.FlowFilter{{ServiceNames: []string{"api-svc"}}}, []*flowrecord.Record{web}},
		{"CIDR", []*pb.FlowFilter{{Ips: []string{"203.0.113.0/24"}}}, []*flowrecord.Record{ext}},
		{"address", []*pb.FlowFilter{{Ips: []string{"10.10.0.5"}, Direction: from}}, all},
		{"address on the other side", []*pb.FlowFilter{{Ips: []string{"10.10.0.5"}, Direction: to}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := parseRequest(&pb.GetFlowsRequest{ClusterWide: true, Filters: tt.filters})
			require.NoError(t, err)
			var got []*flowrecord.Record
			for _, r := range all {
				if q.matches(r) {
					got = append(got, r)
				}
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// collect runs serve over a ring until it returns, with every endpoint in full.
func collect(t *testing.T, r *ring, req *pb.GetFlowsRequest) ([]*pb.GetFlowsResponse, error) {
	t.Helper()
	q, err := parseRequest(req)
	require.NoError(t, err)
	var out []*pb.GetFlowsResponse
	err = serve(context.Background(), r, q, &viewer{scope: q.scope}, time.Minute, r.oldest(), func(resp *pb.GetFlowsResponse, _ uint64) error {
		out = append(out, resp)
		return nil
	})
	return out, err
}

func pushRecords(r *ring, n int, end time.Time) {
	batch := make([]entry, n)
	for i := range batch {
		rec := podRecord("ns-a", "web", "ns-b", "api")
		rec.End = end.Add(time.Duration(i) * time.Second)
		rec.Source.Port = uint16(1000 + i)
		batch[i] = makeEntry(rec)
	}
	r.push(batch)
}

func flowsOf(resps []*pb.GetFlowsResponse) []*pb.Flow {
	var out []*pb.Flow
	for _, r := range resps {
		out = append(out, r.Flows...)
	}
	return out
}

func TestServeHistory(t *testing.T) {
	r := newRing(1000)
	pushRecords(r, 250, t0)
	resps, err := collect(t, r, &pb.GetFlowsRequest{ClusterWide: true})
	require.NoError(t, err)
	require.Len(t, resps, 3, "batches of at most 100")
	flows := flowsOf(resps)
	require.Len(t, flows, 250)
	require.Equal(t, uint32(1000), flows[0].Transport.SourcePort, "oldest first")

	resps, err = collect(t, r, &pb.GetFlowsRequest{ClusterWide: true, MaxCount: 120})
	require.NoError(t, err)
	require.Len(t, flowsOf(resps), 120)

	resps, err = collect(t, r, &pb.GetFlowsRequest{ClusterWide: true, Since: timestamppb.New(t0.Add(200 * time.Second))})
	require.NoError(t, err)
	flows = flowsOf(resps)
	require.Len(t, flows, 50)
	require.Equal(t, t0.Add(200*time.Second), flows[0].EndTs.AsTime())

	resps, err = collect(t, r, &pb.GetFlowsRequest{Namespaces: []string{"ns-z"}})
	require.NoError(t, err)
	require.Empty(t, resps, "no record has an endpoint in ns-z")
}

func TestServeFollow(t *testing.T) {
	r := newRing(1000)
	pushRecords(r, 3, t0)
	q, err := parseRequest(&pb.GetFlowsRequest{Namespaces: []string{"ns-b"}, Follow: true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan *pb.GetFlowsResponse, 10)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, r, q, &viewer{scope: q.scope}, time.Minute, r.oldest(), func(resp *pb.GetFlowsResponse, _ uint64) error {
			got <- resp
			return nil
		})
	}()
	require.Len(t, (<-got).Flows, 3, "history first")
	pushRecords(r, 2, t0.Add(time.Hour))
	resp := <-got
	require.Len(t, resp.Flows, 2, "then live records")
	require.Equal(t, t0.Add(time.Hour), resp.Flows[0].EndTs.AsTime())
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	// The ring's shutdown ends a following stream.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go func() {
		done <- serve(ctx2, r, q, &viewer{scope: q.scope}, time.Minute, r.oldest(), func(*pb.GetFlowsResponse, uint64) error { return nil })
	}()
	r.close()
	require.NoError(t, <-done)
}

func TestServeSlowReaderIsToldWhatItLost(t *testing.T) {
	r := newRing(16)
	q, err := parseRequest(&pb.GetFlowsRequest{ClusterWide: true, Follow: true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	unblock := make(chan struct{})
	got := make(chan *pb.GetFlowsResponse, 100)
	go func() {
		_ = serve(ctx, r, q, &viewer{scope: q.scope}, time.Minute, r.oldest(), func(resp *pb.GetFlowsResponse, _ uint64) error {
			got <- resp
			<-unblock // the client is slow
			return nil
		})
	}()
	pushRecords(r, 1, t0)
	first := <-got // the stream is now stuck in its first send
	// 1 000 records while it is stuck: the ring keeps the last 16.
	for i := 0; i < 100; i++ {
		pushRecords(r, 10, t0)
	}
	close(unblock)
	received, lastDropped := len(first.Flows), uint64(0)
	for received+int(lastDropped) < 1001 {
		resp := <-got
		require.GreaterOrEqual(t, resp.DroppedCount, lastDropped, "dropped_count is cumulative")
		lastDropped = resp.DroppedCount
		received += len(resp.Flows)
	}
	require.Equal(t, uint64(1000-16), lastDropped)
	require.Equal(t, 17, received)
}
