//go:build flowtel_safe

package flowrecord

// pdataFastPaths is off in the flowtel_safe build: pdata's public API
// alone (see fastpaths.go).
const pdataFastPaths = false
