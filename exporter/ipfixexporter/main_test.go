package ipfixexporter

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupCollectorBuild()
	if code == 0 {
		goleak.VerifyTestMain(nopM{})
	}
	os.Exit(code)
}

// nopM lets goleak check for leaks after the tests ran (and after the shared
// collector binary's build directory was removed).
type nopM struct{}

func (nopM) Run() int { return 0 }
