// Package peer builds and starts testbed/cmd/flowpeer, the traffic tool of the
// testbed, for tests: a server in a network namespace, a client command run with
// netlab.Exec. (It does not import netlab, whose own tests use it.)
package peer

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Build compiles flowpeer into the test's temporary directory.
func Build(tb testing.TB) string {
	tb.Helper()
	_, self, _, _ := runtime.Caller(0)
	bin := filepath.Join(tb.TempDir(), "flowpeer")
	cmd := exec.Command("go", "build", "-o", bin, "./testbed/cmd/flowpeer")
	cmd.Dir = filepath.Join(filepath.Dir(self), "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build flowpeer: %v\n%s", err, out)
	}
	return bin
}

// Serve starts a flowpeer server (TCP and UDP on port 8080, answering reply
// bytes) in namespace ns, waits until it listens, and stops it at the end of the test.
func Serve(tb testing.TB, bin, ns string, reply int) {
	tb.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, bin, "serve", "-listen", "[::]:8080", "-reply", fmt.Sprint(reply))
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start flowpeer in %s: %v", ns, err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		tb.Fatalf("flowpeer in %s did not start: %q %v", ns, line, err)
	}
}
