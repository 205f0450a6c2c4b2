// Package recordform names the two forms in which flowtel's components can
// hand flow records on (architecture decision D13) and gives the encoder of
// each, for the components whose configuration chooses one (k8s_flow,
// antrea_flows, conntrack).
package recordform // import "github.com/flowtel/flowtel/internal/flowrecord/recordform"

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
)

const (
	// Attributes is the public schema (docs/flow-schema.md): one attribute
	// a field, what any pipeline and exporter can read.
	Attributes = "attributes"
	// Compact is flowtel's own form: flow.key and the record as bytes in
	// the Body (flowtel.record.encoding compact/1), which only flowtel's
	// components read.
	Compact = "compact"
)

// Encoder is the encoder of the form named; false for a name that is
// neither form.
func Encoder(name string) (func(*flowrecord.Record, plog.LogRecord), bool) {
	switch name {
	case Attributes:
		return attrcodec.Encode, true
	case Compact:
		return compactcodec.Encode, true
	}
	return nil, false
}

// Check is nil for a form's name, else the configuration error of the
// encoding key, which says where compact is the right choice (readers: the
// only components that read the records, such as "flowtel gateways").
func Check(name, readers string) error {
	if _, ok := Encoder(name); ok {
		return nil
	}
	return fmt.Errorf("encoding: unknown (got %q); set %s (the public schema, default) or %s (only when the records go to %s alone)", name, Attributes, Compact, readers)
}
