// Package catalogue is the field catalogue of a flow record: every value of a
// flowrecord.Record that crosses a wire, with its OTLP attribute, the Antrea
// IPFIX IEs and ClickHouse columns that carry it, a typed accessor reading it
// (Value) and where it lives in the Record (Ref, which its IEs and columns
// carry too). Ref.At is the one place a Record field is located by its
// offset: the codecs read and write fields through it, writers filling a
// column read them through a Reader. The attribute codec, the compact codec,
// the ipfix exporter's layouts, the clickhouse_flows exporter's table, the
// flow_stream history reader and the generated tables of docs/flow-schema.md
// and docs/clickhouse.md all come from it: for those, adding a field to the
// Record and one entry here (fields.go) is all they need. antrea_flows'
// inbound IPFIX IE table comes from it too (IEs marked Inbound are read
// from agents and never written; Fallback ones read only while their field
// is unset). Antrea's protobuf Flow, which flow_stream writes and
// antrea_flows reads, has one mapping keyed by Field.Name and located
// through Field.WireRef, internal/antreawire/flowpb: a field that Flow
// carries is one line there too. antrea_flows reads both straight into the
// Record it makes its record half of, with no field list of its own.
package catalogue
