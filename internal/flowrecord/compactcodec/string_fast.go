//go:build !flowtel_safe

package compactcodec

import "unsafe"

// ownString is b as a string without copying it: b is the decoder's own
// copy of a body, which nothing else holds or changes. (The flowtel_safe
// build leaves this file out: string_safe.go copies.)
func ownString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
