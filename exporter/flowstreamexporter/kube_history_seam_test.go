//go:build integration

package flowstreamexporter

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestHistoryThenLive: a following stream whose since is older than the
// ring gets ClickHouse's rows, then the ring's, then new records, each
// record once: the records in both stores at the seam, and one ClickHouse
// had before the ring, are not sent twice; none is left out. After a
// restart (a new, empty ring) the same since is served from ClickHouse.
func TestHistoryThenLive(t *testing.T) {
	store := startFlowStore(t)
	c := startCluster(t, withHistory(store, 1000))
	order := []string{"h1", "h2", "h3", "o1", "o2", "x", "r1", "n1", "m"}
	recs := map[string]*flowrecord.Record{}
	for _, n := range order {
		recs[n] = podRecord("ns-a", "web", "ns-b", "api")
	}
	names := named(recs, order, t0)
	recs["x"].End = recs["o1"].End // ends with the ring's oldest: near the seam
	recs["x"].Start = recs["x"].End.Add(-5 * time.Second)

	store.write(t, recs["h1"], recs["h2"], recs["h3"]) // older than the ring
	store.write(t, recs["o1"], recs["o2"])             // in both stores
	c.push(t, recs["o1"], recs["o2"], recs["r1"])      // r1: not in ClickHouse yet
	store.write(t, recs["x"])                          // in ClickHouse before the ring

	tok := tokenCred(c.serviceAccount(t, "team", "seam-viewer", map[string][]string{flowViewer: {"ns-a"}}))
	since := timestamppb.New(t0.Add(-time.Hour))
	next := c.follow(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: since})
	resp, err := next()
	require.NoError(t, err)
	require.NotNil(t, resp.Info, "StreamInfo first")
	var history, live []string
	for done := false; !done; {
		resp, err := next()
		require.NoError(t, err)
		history = append(history, portNames(names, resp.Flows)...)
		if st := resp.History; st != nil {
			require.False(t, st.Truncated)
			done = true
		}
	}
	require.Equal(t, []string{"h1", "h2", "h3", "x"}, history, "ClickHouse's rows, oldest first, without those the ring holds")

	c.push(t, recs["x"]) // reaches the ring after ClickHouse: already sent
	store.write(t, recs["n1"])
	c.push(t, recs["n1"], recs["m"])
	deadline := time.After(20 * time.Second)
	for !slices.Contains(live, "m") {
		select {
		case <-deadline:
			t.Fatalf("the live part never reached m; got %v", live)
		default:
		}
		resp, err := next()
		require.NoError(t, err)
		require.Nil(t, resp.History, "history ends once")
		live = append(live, portNames(names, resp.Flows)...)
	}
	require.Equal(t, []string{"o1", "o2", "r1", "n1", "m"}, live, "the ring's records from the seam on, x not again")

	// After a restart the ring is empty and another epoch: a client that
	// resumes with its old token and since gets ClickHouse's rows.
	c.restart(t)
	resps, err := c.responses(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: since,
		Resume: &pb.ResumeToken{StreamEpoch: "before-the-restart", SequenceNumber: 3}})
	require.NoError(t, err)
	flows, st := historyFlows(resps)
	require.NotNil(t, st)
	require.ElementsMatch(t, []string{"h1", "h2", "h3", "o1", "x", "o2", "n1"}, portNames(names, flows),
		fmt.Sprintf("every row ClickHouse holds (%d rows), once", st.Rows))
	require.True(t, slices.IsSortedFunc(flows, func(a, b *pb.Flow) int { return a.EndTs.AsTime().Compare(b.EndTs.AsTime()) }), "oldest end first")
}
