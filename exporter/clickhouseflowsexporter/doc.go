//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml

// Package clickhouseflowsexporter writes flowtel flow records (logs signal,
// internal/flowrecord) into Antrea's ClickHouse `flows` table: the 51 columns
// Antrea's Flow Aggregator writes, with Antrea's names and types, so Theia's
// Grafana dashboards and existing SQL keep working, plus flowtel's own columns
// appended (endpoint kinds, correlation state, Service IP, proxy SNAT address
// and port, UIDs, owner workloads, original destination).
//
// It speaks ClickHouse's native protocol through clickhouse-go/v2 with LZ4
// compression and inserts column-oriented batches through PrepareBatch with an
// explicit column list, which is what ClickHouse 18.16 (the oldest server we
// test against) needs. Batching, queueing and retries are the collector's
// exporterhelper sending queue and retry_on_failure.
package clickhouseflowsexporter // import "github.com/flowtel/flowtel/exporter/clickhouseflowsexporter"
