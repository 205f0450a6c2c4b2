//go:build integration

package flowstreamexporter

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// antreaSchema is Antrea's FlowStreamService schema as an Antrea client has
// it: compiled at test time by protoc from testdata/antrea (Antrea's file
// paths, package, names and numbers), in a registry of its own so that it
// does not meet flowtel's generated types, which share the package name.
type antreaSchema struct {
	request, response protoreflect.MessageDescriptor
}

func loadAntreaSchema(t *testing.T) *antreaSchema {
	t.Helper()
	_, err := exec.LookPath("protoc")
	require.NoError(t, err, "protoc: not found; install it with scripts/deps.sh (Debian protobuf-compiler)")
	out := filepath.Join(t.TempDir(), "antrea.pb")
	cmd := exec.Command("protoc", "-I", filepath.Join("testdata", "antrea"), "--include_imports",
		"--descriptor_set_out="+out, "pkg/apis/flow/v1alpha1/service.proto")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	b, err = os.ReadFile(out)
	require.NoError(t, err)
	var set descriptorpb.FileDescriptorSet
	require.NoError(t, proto.Unmarshal(b, &set))
	files, err := protodesc.NewFiles(&set)
	require.NoError(t, err)
	find := func(name protoreflect.FullName) protoreflect.MessageDescriptor {
		d, err := files.FindDescriptorByName("antrea_io.antrea.pkg.apis.flow.v1alpha1." + name)
		require.NoError(t, err)
		return d.(protoreflect.MessageDescriptor)
	}
	return &antreaSchema{request: find("GetFlowsRequest"), response: find("GetFlowsResponse")}
}

// decode reads what flowtel sent as an Antrea client does.
func (s *antreaSchema) decode(t *testing.T, resp *pb.GetFlowsResponse) *dynamicpb.Message {
	t.Helper()
	b, err := proto.Marshal(resp)
	require.NoError(t, err)
	m := dynamicpb.NewMessage(s.response)
	require.NoError(t, proto.Unmarshal(b, m))
	return m
}

func (s *antreaSchema) field(d protoreflect.MessageDescriptor, name protoreflect.Name) protoreflect.FieldDescriptor {
	return d.Fields().ByName(name)
}

// antreaInfo is what an Antrea client reads in a response's StreamInfo; ok is
// false when the response has none.
func (s *antreaSchema) info(m *dynamicpb.Message) (namespaces []string, clusterWide, ok bool) {
	f := s.field(s.response, "info")
	if !m.Has(f) {
		return nil, false, false
	}
	info := m.Get(f).Message()
	list := info.Get(info.Descriptor().Fields().ByName("authorized_namespaces")).List()
	for i := 0; i < list.Len(); i++ {
		namespaces = append(namespaces, list.Get(i).String())
	}
	return namespaces, info.Get(info.Descriptor().Fields().ByName("cluster_wide")).Bool(), true
}

// antreaStream is what an Antrea client reads of one stream: the first
// response as GetFlows sends it, then serve's.
func antreaStream(t *testing.T, s *antreaSchema, r *ring, req *pb.GetFlowsRequest) []*dynamicpb.Message {
	t.Helper()
	q, err := parseRequest(req)
	require.NoError(t, err)
	from, reset, err := r.start(q.resume)
	require.NoError(t, err)
	out := []*dynamicpb.Message{s.decode(t, firstResponse(q, r.token(from), reset))}
	require.NoError(t, serve(context.Background(), r, q, &viewer{scope: q.scope}, time.Minute, from, func(resp *pb.GetFlowsResponse, _ uint64) error {
		out = append(out, s.decode(t, resp))
		return nil
	}))
	return out
}

// checkAntreaReads holds an Antrea client's reading of a stream to what
// Antrea means: StreamInfo with the stream's scope on the first response
// only, flows and dropped_count where Antrea has them, and nothing of
// flowtel's own (the resume token) read as any of Antrea's fields.
func checkAntreaReads(t *testing.T, s *antreaSchema, resps []*dynamicpb.Message, wantNamespaces []string, wantClusterWide bool, wantFlows int) {
	t.Helper()
	require.NotEmpty(t, resps)
	flows := 0
	for i, m := range resps {
		ns, cw, ok := s.info(m)
		if i == 0 {
			require.True(t, ok, "the first response carries StreamInfo")
			require.Equal(t, wantNamespaces, ns, "StreamInfo.authorized_namespaces")
			require.Equal(t, wantClusterWide, cw, "StreamInfo.cluster_wide")
			require.Zero(t, m.Get(s.field(s.response, "flows")).List().Len(), "the first response has no flows")
		} else {
			require.False(t, ok, "response %d: StreamInfo is on the first response only, got namespaces %q cluster_wide %v", i, ns, cw)
		}
		require.Zero(t, m.Get(s.field(s.response, "dropped_count")).Uint(), "response %d: dropped_count", i)
		list := m.Get(s.field(s.response, "flows")).List()
		for j := 0; j < list.Len(); j++ {
			k8s := list.Get(j).Message()
			k8s = k8s.Get(k8s.Descriptor().Fields().ByName("k8s")).Message()
			require.Equal(t, "ns-a", k8s.Get(k8s.Descriptor().Fields().ByName("source_pod_namespace")).String())
			require.Equal(t, "api", k8s.Get(k8s.Descriptor().Fields().ByName("destination_pod_name")).String())
		}
		flows += list.Len()
	}
	require.Equal(t, wantFlows, flows)
}

// TestAntreaClientReadsStream: a client built from Antrea's proto (antrea#8276
// merged: GetFlowsResponse.info = 3 is StreamInfo) reads flowtel's stream as
// Antrea's. With the resume token on 3, as flowtel had it, that client read
// the token as StreamInfo on every response (the epoch as a Namespace, a
// nonzero sequence number as cluster_wide).
func TestAntreaClientReadsStream(t *testing.T) {
	s := loadAntreaSchema(t)
	r := newRing(1000)
	pushRecords(r, 150, t0)

	t.Run("one Namespace", func(t *testing.T) {
		checkAntreaReads(t, s, antreaStream(t, s, r, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}}), []string{"ns-a"}, false, 150)
	})
	t.Run("cluster-wide", func(t *testing.T) {
		checkAntreaReads(t, s, antreaStream(t, s, r, &pb.GetFlowsRequest{ClusterWide: true}), nil, true, 150)
	})
	t.Run("a resumed stream, as flowctl opens it", func(t *testing.T) {
		// An Antrea client may read a stream flowctl resumed (a proxy re-serving
		// it): the token is still not Antrea's StreamInfo.
		tok := &pb.ResumeToken{StreamEpoch: r.epoch, SequenceNumber: 49}
		checkAntreaReads(t, s, antreaStream(t, s, r, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Resume: tok}), []string{"ns-a"}, false, 100)
		other := &pb.ResumeToken{StreamEpoch: "restarted", SequenceNumber: 7}
		checkAntreaReads(t, s, antreaStream(t, s, r, &pb.GetFlowsRequest{ClusterWide: true, Resume: other}), nil, true, 150)
	})
}

// TestAntreaClientRequest: what an Antrea client sends is read by flowtel
// field for field, and never as a resume; what flowctl sends (with a token)
// is, read by Antrea's schema, Antrea's request with the token left unknown.
func TestAntreaClientRequest(t *testing.T) {
	s := loadAntreaSchema(t)
	d := s.request
	m := dynamicpb.NewMessage(d)
	filter := dynamicpb.NewMessage(d.Fields().ByName("filters").Message())
	filter.Set(filter.Descriptor().Fields().ByName("pod_label_selector"), protoreflect.ValueOfString("app=web"))
	filter.Set(filter.Descriptor().Fields().ByName("direction"), protoreflect.ValueOfEnum(2))
	m.Mutable(d.Fields().ByName("filters")).List().Append(protoreflect.ValueOfMessage(filter))
	m.Set(d.Fields().ByName("max_count"), protoreflect.ValueOfUint32(42))
	m.Set(d.Fields().ByName("follow"), protoreflect.ValueOfBool(true))
	m.Mutable(d.Fields().ByName("namespaces")).List().Append(protoreflect.ValueOfString("ns-a"))
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	var req pb.GetFlowsRequest
	require.NoError(t, proto.Unmarshal(b, &req))
	require.True(t, proto.Equal(&pb.GetFlowsRequest{
		Filters:    []*pb.FlowFilter{{PodLabelSelector: "app=web", Direction: pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_TO}},
		MaxCount:   42,
		Follow:     true,
		Namespaces: []string{"ns-a"},
	}, &req), "%v", &req)
	require.Nil(t, req.Resume)

	b, err = proto.Marshal(&pb.GetFlowsRequest{ClusterWide: true, Resume: &pb.ResumeToken{StreamEpoch: "e", SequenceNumber: 3}})
	require.NoError(t, err)
	m = dynamicpb.NewMessage(d)
	require.NoError(t, proto.Unmarshal(b, m))
	require.True(t, m.Get(d.Fields().ByName("cluster_wide")).Bool())
	require.Zero(t, m.Get(d.Fields().ByName("namespaces")).List().Len())
	require.Zero(t, m.Get(d.Fields().ByName("filters")).List().Len())
	require.NotEmpty(t, m.GetUnknown(), "the token is a field Antrea does not define")
}
