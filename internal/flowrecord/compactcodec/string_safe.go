//go:build flowtel_safe

package compactcodec

import "go.opentelemetry.io/collector/pdata/pcommon"

// ownString is b as a string, copied (see string_fast.go for the other build).
func ownString(b []byte) string { return string(b) }

// bodyView is b's bytes as a string, copied (string_fast.go shares them).
func bodyView(b pcommon.ByteSlice) string { return string(b.AsRaw()) }
