package flowstreamexporter

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/antreawire/flowpb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// toFlow converts a record to its wire form (Antrea's Flow message): its
// catalogue fields through the one pb.Flow mapping (flowpb), then what only
// the stream says: how much of each endpoint it discloses.
func toFlow(r *flowrecord.Record, src, dst tier) *pb.Flow {
	f := &pb.Flow{}
	flowpb.Put(r, f)
	f.K8S.SourceDisclosure, f.K8S.DestinationDisclosure = pb.EndpointDisclosure(src), pb.EndpointDisclosure(dst)
	// The IPFIX block names the exporting Node: only on a record whose two
	// endpoints are both disclosed in full.
	if src == tierFull && dst == tierFull {
		if f.Ipfix == nil {
			f.Ipfix = &pb.IPFIX{}
		}
		f.Ipfix.ExportTime = ts(r.Observed)
	} else {
		f.Ipfix = nil
	}
	return f
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
