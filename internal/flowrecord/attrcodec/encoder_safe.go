//go:build flowtel_safe

package attrcodec

import (
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/xpdata"
)

// An encoder appends the attributes of one record through xpdata's
// MapBuilder and pdata's setters (see encoder_fast.go for the other build).
type encoder struct{ b xpdata.MapBuilder }

var encoders = sync.Pool{New: func() any { return new(encoder) }}

// newEncoder returns an encoder with room for attrs attributes.
func newEncoder(attrs, _, _, _ int) *encoder {
	e := encoders.Get().(*encoder)
	e.b.EnsureCapacity(attrs)
	return e
}

// finish moves the attributes into m, replacing its previous ones, and
// gives e back.
func (e *encoder) finish(m pcommon.Map) {
	e.b.UnsafeIntoMap(m)
	encoders.Put(e)
}

func (e *encoder) str(name, s string)       { e.b.AppendEmpty(name).SetStr(s) }
func (e *encoder) int(name string, i int64) { e.b.AppendEmpty(name).SetInt(i) }

// labelsMap appends the attribute name holding labels, a map of strings.
func (e *encoder) labelsMap(name string, labels map[string]string) {
	lm := e.b.AppendEmpty(name).SetEmptyMap()
	var lb xpdata.MapBuilder // a Go map's keys are distinct
	lb.EnsureCapacity(len(labels))
	for k, v := range labels {
		lb.AppendEmpty(k).SetStr(v)
	}
	lb.UnsafeIntoMap(lm)
}
