// Package attrcodec is the attribute form of a flow record: a
// flowrecord.Record as an OpenTelemetry LogRecord whose attributes are the
// catalogue's (docs/flow-schema.md), the form every OTLP reader of flowtel's
// records sees. Decode reads records in either form, the attribute form or
// the compact one of the node → gateway hop (compactcodec).
//
// Both directions read and write the Record through the catalogue's Refs
// (offsets), not through a function a field. Where pdata's and xpdata's
// internal layouts are what probes at start expect, Encode writes pdata's
// value wrappers itself and Decode reads them (encoder_fast.go,
// read_fast.go); building with the flowtel_safe tag leaves those files out,
// and the codec goes through pdata's public API alone (encoder_safe.go,
// read_safe.go).
package attrcodec
