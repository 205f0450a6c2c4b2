//go:build integration

// Package deploy_test checks that everything under deploy/ is something a
// cluster accepts and a flowtel collector runs: the collector configuration
// embedded in each manifest, chart rendering and Operator CR passes the
// distribution's config validation with the environment the manifest gives
// it, the files it names are mounted, and a real kube-apiserver accepts the
// objects (apiserver_test.go).
package deploy_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
