//go:build !flowtel_safe

package compactcodec

import (
	"reflect"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// ownString is b as a string without copying it: b is the decoder's own
// copy of a body, which nothing else holds or changes. (The flowtel_safe
// build leaves this file out: string_safe.go copies.)
func ownString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// byteSliceLayout has the layout of pcommon.ByteSlice: a pointer to the
// bytes and one to the state.
type byteSliceLayout struct {
	orig  *[]byte
	state unsafe.Pointer
}

// viewable tells whether pcommon.ByteSlice has byteSliceLayout, and bodyView
// reads it as such (probed once, at start).
var viewable = probeView()

func probeView() bool {
	t := reflect.TypeFor[pcommon.ByteSlice]()
	if t.Kind() != reflect.Struct || t.NumField() != 2 || t.Size() != unsafe.Sizeof(byteSliceLayout{}) ||
		t.Field(0).Type != reflect.TypeFor[*[]byte]() || t.Field(0).Offset != 0 || t.Field(1).Type.Kind() != reflect.Pointer {
		return false
	}
	b := pcommon.NewByteSlice()
	b.FromRaw([]byte("probe"))
	v := (*byteSliceLayout)(unsafe.Pointer(&b)).orig
	if v == nil || string(*v) != "probe" {
		return false
	}
	b.SetAt(0, 'P') // the view is b's own bytes, not a copy
	return string(*v) == "Probe"
}

// bodyView is b's bytes as a string that shares them with b, when pdata's
// layout is the probed one; else a copy (as the safe build's).
func bodyView(b pcommon.ByteSlice) string {
	if !viewable {
		return ownString(b.AsRaw())
	}
	v := *(*byteSliceLayout)(unsafe.Pointer(&b)).orig
	return unsafe.String(unsafe.SliceData(v), len(v))
}
