//go:build integration

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/testbed/collector"
)

// profileProcess records p's CPU profile with perf (call stacks, 999 Hz)
// into the file FLOWTEL_BENCH_PERF names, from now until the returned
// function is called; without FLOWTEL_BENCH_PERF it does nothing. A
// benchmark hook, not a product one: the distributions carry no profiler.
// Read it with `perf report -i <file> --no-children`.
func profileProcess(b *testing.B, p *collector.Process) (stop func()) {
	out := os.Getenv("FLOWTEL_BENCH_PERF")
	if out == "" {
		return func() {}
	}
	perf, err := exec.LookPath("perf")
	require.NoError(b, err, "FLOWTEL_BENCH_PERF needs perf")
	cmd := exec.Command(perf, "record", "-q", "-F", "999", "-g", "-o", out, "-p", strconv.Itoa(p.Pid()))
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Start())
	return func() {
		require.NoError(b, cmd.Process.Signal(syscall.SIGINT))
		// perf ends on SIGINT by that signal, its record written.
		if err := cmd.Wait(); err != nil {
			var exit *exec.ExitError
			require.True(b, errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT, "perf record: %v", err)
		}
	}
}

// benchGatewayBinary is the gateway a load run starts: the one make build
// made, or for a before/after comparison the binary FLOWTEL_BENCH_GATEWAY
// names.
func benchGatewayBinary(b *testing.B) string {
	if bin := os.Getenv("FLOWTEL_BENCH_GATEWAY"); bin != "" {
		return bin
	}
	bin, err := collector.Binary(repoRoot, "flowtel-gateway")
	require.NoError(b, err)
	return bin
}
