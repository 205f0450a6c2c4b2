// Package proc holds what the testbed's harnesses do alike with the peer
// processes they run (ClickHouse, ZooKeeper, collectors, the control plane):
// stopping one gracefully, and building peers with a package's build.sh.
package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Stop sends sig to p and waits up to grace for exited to yield (the
// harness's goroutine around cmd.Wait closes it or sends on it); then it
// kills p and waits again, so that the process has surely gone when Stop
// returns. It reports whether p had to be killed.
func Stop[T any](p *os.Process, sig os.Signal, exited <-chan T, grace time.Duration) (killed bool) {
	_ = p.Signal(sig)
	select {
	case <-exited:
		return false
	case <-time.After(grace):
		_ = p.Kill()
		<-exited
		return true
	}
}

// BuildScript is a package's build.sh, run at most once per test binary: its
// peers take minutes to build when the cache is cold, and every test of the
// binary uses the same ones.
type BuildScript struct {
	once sync.Once
	dir  string
	err  error
}

// Dir returns the directory the build.sh beside self prints, running it
// (RunBuildScript) on the first call only; later calls return the first
// call's directory or error.
func (b *BuildScript) Dir(self, what string) (string, error) {
	b.once.Do(func() { b.dir, b.err = RunBuildScript(self, what) })
	return b.dir, b.err
}

// RunBuildScript runs the build.sh beside the calling package's source file
// self (from runtime.Caller) and returns the directory it prints, where it
// put what it built. what names the peers in the error, with the script's
// standard error when it failed.
func RunBuildScript(self, what string) (string, error) {
	script := filepath.Join(filepath.Dir(self), "build.sh")
	out, err := exec.Command(script).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("building %s with %s: %w", what, script, err)
	}
	return strings.TrimSpace(string(out)), nil
}
