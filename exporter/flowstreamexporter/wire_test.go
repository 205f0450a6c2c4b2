package flowstreamexporter

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// The names and numbers Antrea's clients speak, written out by hand rather
// than read from the generated code.
func TestWireNames(t *testing.T) {
	require.Equal(t, "/antrea_io.antrea.pkg.apis.flow.v1alpha1.FlowStreamService/GetFlows", pb.FlowStreamService_GetFlows_FullMethodName)
	require.Equal(t, "antrea_io.antrea.pkg.apis.flow.v1alpha1.Flow", string((&pb.Flow{}).ProtoReflect().Descriptor().FullName()))
}

func TestWireRequestFieldNumbers(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, 3, protowire.VarintType) // max_count
	b = protowire.AppendVarint(b, 42)
	b = protowire.AppendTag(b, 4, protowire.VarintType) // follow
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 5, protowire.VarintType) // cluster_wide
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 6, protowire.BytesType) // namespaces
	b = protowire.AppendString(b, "ns-a")
	var filter []byte
	filter = protowire.AppendTag(filter, 3, protowire.BytesType) // pod_label_selector
	filter = protowire.AppendString(filter, "app=web")
	filter = protowire.AppendTag(filter, 7, protowire.VarintType) // direction TO
	filter = protowire.AppendVarint(filter, 2)
	b = protowire.AppendTag(b, 1, protowire.BytesType) // filters
	b = protowire.AppendBytes(b, filter)
	var tok []byte
	tok = protowire.AppendTag(tok, 1, protowire.BytesType) // stream_epoch
	tok = protowire.AppendString(tok, "epoch-1")
	tok = protowire.AppendTag(tok, 2, protowire.VarintType) // sequence_number (int64: -1 is ten bytes)
	tok = protowire.AppendVarint(tok, 1<<64-1)
	b = protowire.AppendTag(b, 1000, protowire.BytesType) // resume (flowtel's own)
	b = protowire.AppendBytes(b, tok)
	var req pb.GetFlowsRequest
	require.NoError(t, proto.Unmarshal(b, &req))
	require.Equal(t, uint32(42), req.MaxCount)
	require.True(t, req.Follow)
	require.True(t, req.ClusterWide)
	require.Equal(t, []string{"ns-a"}, req.Namespaces)
	require.Equal(t, "app=web", req.Filters[0].PodLabelSelector)
	require.Equal(t, pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_TO, req.Filters[0].Direction)
	require.Equal(t, "epoch-1", req.Resume.StreamEpoch)
	require.Equal(t, int64(-1), req.Resume.SequenceNumber)
}

func TestWireResponseFieldNumbers(t *testing.T) {
	resp := &pb.GetFlowsResponse{
		DroppedCount: 9,
		ResumeToken:  &pb.ResumeToken{StreamEpoch: "e", SequenceNumber: 300},
		ResumeReset:  true,
		Info:         &pb.StreamInfo{AuthorizedNamespaces: []string{"ns-a"}},
		Flows:        []*pb.Flow{{K8S: &pb.Kubernetes{SourceDisclosure: pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY, DestinationDisclosure: pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW}}},
	}
	b, err := proto.Marshal(resp)
	require.NoError(t, err)
	fields := map[protowire.Number][]byte{} // raw value bytes (length prefix included)
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		b = b[l:]
		l = protowire.ConsumeFieldValue(n, typ, b)
		fields[n] = b[:l]
		b = b[l:]
	}
	require.Equal(t, []byte{9}, fields[2], "dropped_count = 2")
	// info = 3 (Antrea's, antrea#8276): StreamInfo{authorized_namespaces = 1}.
	info, _ := protowire.ConsumeBytes(fields[3])
	require.Equal(t, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "ns-a"), info)
	// resume_token = 1000 (flowtel's own, where Antrea's clients skip it):
	// ResumeToken{stream_epoch = 1, sequence_number = 2}.
	tok, _ := protowire.ConsumeBytes(fields[1000])
	want := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "e")
	want = protowire.AppendVarint(protowire.AppendTag(want, 2, protowire.VarintType), 300)
	require.Equal(t, want, tok)
	require.Equal(t, []byte{1}, fields[1001], "resume_reset = 1001 (flowtel's own)")
	require.Len(t, fields, 5, "flows, dropped_count, info, resume_token, resume_reset")
	// flows = 1: Flow{k8s = 8: Kubernetes{source_disclosure = 36, destination_disclosure = 37}}.
	flow, _ := protowire.ConsumeBytes(fields[1])
	k8s := protowire.AppendTag(nil, 36, protowire.VarintType)
	k8s = protowire.AppendVarint(k8s, 1)
	k8s = protowire.AppendTag(k8s, 37, protowire.VarintType)
	k8s = protowire.AppendVarint(k8s, 2)
	want = protowire.AppendTag(nil, 8, protowire.BytesType)
	want = protowire.AppendBytes(want, k8s)
	require.Equal(t, want, flow)
}
