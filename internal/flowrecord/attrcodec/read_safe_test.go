//go:build flowtel_safe

package attrcodec

import "testing"

// throughAPI: the flowtel_safe build reads through pdata's API already.
func throughAPI(testing.TB) {}
