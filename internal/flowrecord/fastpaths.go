//go:build !flowtel_safe

package flowrecord

// pdataFastPaths: Encode and Decode read and write pdata's and xpdata's
// internal layout (encoder.go, pdataread.go) where the probes at start
// confirm it. Building with the flowtel_safe tag turns every such path off:
// the codec then goes through pdata's public API alone, as it does when a
// probe fails (make check runs the unit tests that way too).
const pdataFastPaths = true
