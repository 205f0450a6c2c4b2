// Package flowstreampb is the flow stream's wire API: the Go code of
// proto/flowstream/v1alpha1/{flow,service}.proto, Antrea's FlowStreamService
// (package antrea_io.antrea.pkg.apis.flow.v1alpha1) with Antrea's message
// names and field numbers, written for flowtel from those facts. The
// flow_stream exporter serves it and flowctl reads it; a Go client of its own
// imports this package and nothing of either. proto/generate.sh writes the
// *.pb.go files; TestGeneratedCodeIsCurrent keeps them current.
package flowstreampb
