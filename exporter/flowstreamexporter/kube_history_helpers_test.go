//go:build integration

package flowstreamexporter

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/deploy/dashboards/demodata"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// historyDB is the database the tests' clickhouse_flows exporter writes.
const historyDB = "flowtel"

// flowStore is a real ClickHouse whose flows table is written by a real
// clickhouse_flows exporter, as on a gateway.
type flowStore struct {
	srv *chserver.Server
}

func startFlowStore(t testing.TB) *flowStore {
	t.Helper()
	return &flowStore{srv: chserver.Start(t, chserver.Options{})}
}

// withHistory points the flow_stream exporter at the store, with a row limit.
func withHistory(s *flowStore, maxRows int) clusterOption {
	return func(c *Config) {
		c.History.Endpoint, c.History.Database, c.History.MaxRows = s.srv.Endpoint(), historyDB, maxRows
	}
}

// write writes records through a clickhouse_flows exporter, which holds
// them in ClickHouse when it returns.
func (s *flowStore) write(t testing.TB, recs ...*flowrecord.Record) {
	t.Helper()
	demodata.Write(t, s.srv, historyDB, recs)
}

// responses reads a stream that ends by itself: every response after the
// StreamInfo, or the error it ended with.
func (c *cluster) responses(t *testing.T, cred credential, req *pb.GetFlowsRequest) ([]*pb.GetFlowsResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(withToken(context.Background(), cred), 30*time.Second)
	defer cancel()
	s, err := pb.NewFlowStreamServiceClient(c.conn(t, cred)).GetFlows(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*pb.GetFlowsResponse
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if resp.Info == nil {
			out = append(out, resp)
		}
	}
}

// historyFlows are the flows of responses, and the history status of the one
// that ended the history part (nil: none did).
func historyFlows(resps []*pb.GetFlowsResponse) ([]*pb.Flow, *pb.HistoryStatus) {
	var flows []*pb.Flow
	var st *pb.HistoryStatus
	for _, r := range resps {
		flows = append(flows, r.Flows...)
		if r.History != nil {
			st = r.History
		}
	}
	return flows, st
}

// named gives each record a distinct source port and end second and
// returns the name of each port: history flows have no id (the table keeps
// none), so tests tell them apart by source port.
func named(recs map[string]*flowrecord.Record, order []string, end time.Time) map[uint32]string {
	names := map[uint32]string{}
	for i, name := range order {
		r := recs[name]
		r.Source.Port = uint16(20000 + i)
		r.End = end.Add(time.Duration(i) * time.Second)
		r.Start = r.End.Add(-5 * time.Second)
		names[uint32(r.Source.Port)] = name
	}
	return names
}

// byPort maps flows by the names their source ports were given.
func byPort(names map[uint32]string, flows []*pb.Flow) map[string]*pb.Flow {
	out := map[string]*pb.Flow{}
	for _, f := range flows {
		out[names[f.Transport.GetSourcePort()]] = f
	}
	return out
}

// portNames are the names of flows, in order.
func portNames(names map[uint32]string, flows []*pb.Flow) []string {
	out := make([]string, len(flows))
	for i, f := range flows {
		out[i] = names[f.Transport.GetSourcePort()]
	}
	return out
}
