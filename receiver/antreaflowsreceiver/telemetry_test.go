package antreaflowsreceiver

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"net/netip"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// counter is the value of a counter's data point with the attribute given
// (key "" for the point without attributes); 0 when it has none.
func (s *started) counter(t testing.TB, name, key, value string) int64 {
	t.Helper()
	m, err := s.tel.GetMetric(name)
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is not an int64 sum", name)
	var total int64
	for _, dp := range sum.DataPoints {
		if key == "" {
			total += dp.Value
			continue
		}
		if v, ok := dp.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
			total += dp.Value
		}
	}
	return total
}
