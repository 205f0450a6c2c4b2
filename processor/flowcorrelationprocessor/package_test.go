package flowcorrelationprocessor

import (
	"testing"

	"go.uber.org/goleak"
)

// Shutdown must stop every goroutine the processor starts.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
