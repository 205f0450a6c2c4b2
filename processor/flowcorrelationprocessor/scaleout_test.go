package flowcorrelationprocessor

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// ring is a consistent-hash ring built the way the contrib load_balancing
// exporter (v0.161.0) builds and reads its own, so that the test routes
// records exactly as a real deployment would: 200 points per endpoint, each
// at CRC-32(endpoint ‖ little-endian uint32 index) mod 131071, sorted by
// position (ties by hash, then endpoint), collisions moved up to 10 slots
// ahead; a key goes to the first point at or after CRC-32(key) mod 131071,
// wrapping around.
type ring struct{ points []ringPoint }

type ringPoint struct {
	pos      uint32
	hash     uint32
	endpoint string
}

const (
	ringPositions  = 131071
	ringWeight     = 200
	ringProbeLimit = 10
)

func newRing(endpoints []string) *ring {
	var cands []ringPoint
	var idx [4]byte
	for _, ep := range endpoints {
		for i := range ringWeight {
			binary.LittleEndian.PutUint32(idx[:], uint32(i))
			h := crc32.NewIEEE()
			h.Write([]byte(ep))
			h.Write(idx[:])
			sum := h.Sum32()
			cands = append(cands, ringPoint{pos: sum % ringPositions, hash: sum, endpoint: ep})
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.pos != b.pos {
			return a.pos < b.pos
		}
		if a.hash != b.hash {
			return a.hash < b.hash
		}
		return a.endpoint < b.endpoint
	})
	used := map[uint32]bool{}
	var pts []ringPoint
	for _, c := range cands {
		pos, probed := c.pos, 0
		for used[pos] && probed < ringProbeLimit {
			pos = (pos + 1) % ringPositions
			probed++
		}
		if probed >= ringProbeLimit {
			continue
		}
		used[pos] = true
		pts = append(pts, ringPoint{pos: pos, endpoint: c.endpoint})
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].pos < pts[j].pos })
	return &ring{points: pts}
}

func (r *ring) endpointFor(id []byte) string {
	pos := crc32.ChecksumIEEE(id) % ringPositions
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].pos >= pos })
	if i == len(r.points) {
		i = 0
	}
	return r.points[i].endpoint
}

// routeByFlowKey splits a batch per backend as load_balancing does with
// routing_key: attributes, routing_attributes: [flow.key]: the routing id of
// a record is "flow.key=<value>|".
func routeByFlowKey(r *ring, ld plog.Logs) map[string]plog.Logs {
	out := map[string]plog.Logs{}
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		rl := rls.At(i)
		sls := rl.ScopeLogs()
		for j := range sls.Len() {
			lrs := sls.At(j).LogRecords()
			for k := range lrs.Len() {
				lr := lrs.At(k)
				id := "flow.key=|"
				if v, ok := lr.Attributes().Get(catalogue.AttrKey); ok {
					id = "flow.key=" + v.AsString() + "|"
				}
				ep := r.endpointFor([]byte(id))
				dst, ok := out[ep]
				if !ok {
					dst = plog.NewLogs()
					out[ep] = dst
				}
				nrl := dst.ResourceLogs().AppendEmpty()
				rl.Resource().CopyTo(nrl.Resource())
				lr.CopyTo(nrl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
			}
		}
	}
	return out
}

// nodeBatches is what two node collectors send for many connections: each
// Node's half of each connection, over two polls.
func nodeBatches(conns int) []plog.Logs {
	var batches []plog.Logs
	for poll, end := range []time.Duration{5 * time.Second, 10 * time.Second} {
		var nodeA, nodeB []*flowrecord.Record
		for i := range conns {
			src, dst := interNode(i, t0.Add(end), uint64(1000*(poll+1)+i), uint64(1010*(poll+1)+i))
			nodeA, nodeB = append(nodeA, src), append(nodeB, dst)
		}
		batches = append(batches, logsOf(nodeA...), logsOf(nodeB...))
	}
	return batches
}

// runGateways feeds the batches through n gateway replicas behind route and
// returns every record they emitted, through shutdown.
func runGateways(t *testing.T, n int, route func(ld plog.Logs, backends []string) map[string]plog.Logs) []flowrecord.Record {
	t.Helper()
	backends := make([]string, n)
	procs := map[string]*flowProcessor{}
	sinks := map[string]*consumertest.LogsSink{}
	for i := range backends {
		backends[i] = fmt.Sprintf("flow-gateway-%d.flow-gateway:4317", i)
		sinks[backends[i]] = &consumertest.LogsSink{}
		procs[backends[i]] = newHarness(t, aggregateConfig(), sinks[backends[i]]).p
	}
	for _, ld := range nodeBatches(400) {
		for ep, part := range route(ld, backends) {
			require.NoError(t, procs[ep].ConsumeLogs(ctx, part))
		}
	}
	var all []flowrecord.Record
	for _, ep := range backends {
		require.NoError(t, procs[ep].Shutdown(ctx))
		all = append(all, decodeAllLogs(t, sinks[ep].AllLogs())...)
	}
	return all
}

// byKey groups exports by connection, without the export time.
func byKey(recs []flowrecord.Record) map[string][]flowrecord.Record {
	m := map[string][]flowrecord.Record{}
	for _, r := range recs {
		r.Observed = time.Time{}
		m[r.Key] = append(m[r.Key], r)
	}
	return m
}

func TestScaleOutBehindLoadBalancingGivesTheSamePairs(t *testing.T) {
	single := runGateways(t, 1, func(ld plog.Logs, b []string) map[string]plog.Logs { return map[string]plog.Logs{b[0]: ld} })
	want := byKey(single)
	require.Len(t, want, 400)
	for _, recs := range want {
		require.Equal(t, flowrecord.CorrelationPaired, recs[0].Correlation)
	}

	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("%d_replicas", n), func(t *testing.T) {
			used := map[string]bool{}
			got := byKey(runGateways(t, n, func(ld plog.Logs, b []string) map[string]plog.Logs {
				parts := routeByFlowKey(newRing(b), ld)
				for ep := range parts {
					used[ep] = true
				}
				return parts
			}))
			assert.Len(t, used, n, "every replica gets a share")
			assert.Equal(t, want, got)
		})
	}

	// The test can fail: routing by sender (as routing_key: service or
	// resource would) splits the halves of every connection.
	t.Run("routing_by_sender_splits_pairs", func(t *testing.T) {
		batch := 0
		got := runGateways(t, 2, func(ld plog.Logs, b []string) map[string]plog.Logs {
			batch++
			return map[string]plog.Logs{b[batch%2]: ld}
		})
		var unpaired int
		for _, r := range got {
			if r.Correlation == flowrecord.CorrelationUnpaired {
				unpaired++
			}
		}
		assert.Equal(t, 2*400, unpaired, "every half is exported unpaired, none lost")
	})
}

func TestRingMatchesLoadBalancingSpread(t *testing.T) {
	r := newRing([]string{"a:4317", "b:4317", "c:4317"})
	assert.LessOrEqual(t, len(r.points), 3*ringWeight)
	assert.Greater(t, len(r.points), 3*ringWeight-10)
	counts := map[string]int{}
	for i := range 3000 {
		counts[r.endpointFor(fmt.Appendf(nil, "flow.key=6|10.0.0.%d:1|10.0.1.1:80|", i))]++
	}
	for ep, c := range counts {
		assert.Greater(t, c, 500, ep) // roughly a third each
	}
	// Deterministic: same key, same backend, whatever the endpoint order.
	r2 := newRing([]string{"c:4317", "a:4317", "b:4317"})
	for i := range 100 {
		id := fmt.Appendf(nil, "flow.key=k%d|", i)
		assert.Equal(t, r.endpointFor(id), r2.endpointFor(id))
	}
}
