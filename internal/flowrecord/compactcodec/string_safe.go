//go:build flowtel_safe

package compactcodec

// ownString is b as a string, copied (see string_fast.go for the other build).
func ownString(b []byte) string { return string(b) }
