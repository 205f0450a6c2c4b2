//go:build integration

package clickhouseflowsexporter

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func sumPoints(m metricdata.Metrics, reason string) int64 {
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		return 0
	}
	var total int64
	for _, dp := range sum.DataPoints {
		if reason != "" {
			if v, ok := dp.Attributes.Value(attribute.Key("reason")); !ok || v.AsString() != reason {
				continue
			}
		}
		total += dp.Value
	}
	return total
}
