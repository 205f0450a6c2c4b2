//go:build integration

package flowstreamexporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// historyDB is the database the tests' clickhouse_flows exporter writes.
const historyDB = "flowtel"

// flowStore is a real ClickHouse with the flows table written by a real
// clickhouse_flows exporter, as on a gateway.
type flowStore struct {
	srv  *chserver.Server
	exp  exporter.Logs
	rows uint64 // rows written so far
}

func startFlowStore(t testing.TB) *flowStore {
	t.Helper()
	srv := chserver.Start(t, chserver.Options{})
	f := clickhouseflowsexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*clickhouseflowsexporter.Config)
	cfg.Endpoint, cfg.Database, cfg.TheiaViews = srv.Endpoint(), historyDB, false
	set := exportertest.NewNopSettings(f.Type())
	set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
	exp, err := f.CreateLogs(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	return &flowStore{srv: srv, exp: exp}
}

// withHistory points the flow_stream exporter at the store, with a row limit.
func withHistory(s *flowStore, maxRows int) clusterOption {
	return func(c *Config) {
		c.History.Endpoint, c.History.Database, c.History.MaxRows = s.srv.Endpoint(), historyDB, maxRows
	}
}

// write writes records through the clickhouse_flows exporter and waits
// until ClickHouse holds them.
func (s *flowStore) write(t *testing.T, recs ...*flowrecord.Record) {
	t.Helper()
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for _, r := range recs {
		attrcodec.Encode(r, lrs.AppendEmpty())
	}
	require.NoError(t, s.exp.ConsumeLogs(context.Background(), ld))
	s.rows += uint64(len(recs))
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.srv.Addr()}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer conn.Close()
	require.Eventually(t, func() bool {
		var n uint64
		err := conn.QueryRow(context.Background(), fmt.Sprintf("SELECT count() FROM %s.flows", historyDB)).Scan(&n)
		return err == nil && n == s.rows
	}, 30*time.Second, 50*time.Millisecond, "ClickHouse never held %d rows", s.rows)
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
