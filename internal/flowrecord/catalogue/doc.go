// Package catalogue is the field catalogue of a flow record: every value of a
// flowrecord.Record that crosses a wire, with its OTLP attribute, the Antrea
// IPFIX IEs and ClickHouse columns that carry it, a typed accessor reading it
// (Value) and where it lives in the Record (Ref). The attribute codec, the
// compact codec, the ipfix exporter's layouts, the clickhouse_flows
// exporter's table and the generated tables of docs/flow-schema.md and
// docs/clickhouse.md all come from it: adding a field to the Record and one
// entry here (fields.go) is all the wires need.
package catalogue
