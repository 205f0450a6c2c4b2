package chserver

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flowtel/flowtel/testbed/proc"
)

// daemon is a server process this package runs, a ClickHouse server or
// ZooKeeper: its output goes to a log file, it dies with the test binary,
// and it is stopped gracefully. cmd is nil when it is not running.
type daemon struct {
	cmd  *exec.Cmd
	done chan error // cmd.Wait's result, once the process has exited
}

// run starts cmd with its output in logf, which is closed when the process
// exits (or at once, when it does not start).
func (d *daemon) run(cmd *exec.Cmd, logf *os.File) error {
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return err
	}
	d.cmd, d.done = cmd, make(chan error, 1)
	go func() { d.done <- cmd.Wait(); _ = logf.Close() }()
	return nil
}

// exited reports whether the process has exited (during start-up: it is not
// stopped otherwise), with its exit error; it is then no longer running.
func (d *daemon) exited() (bool, error) {
	select {
	case err := <-d.done:
		d.cmd = nil
		return true, err
	default:
		return false, nil
	}
}

// stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it. Stopping a stopped daemon is a no-op.
func (d *daemon) stop(grace time.Duration) {
	if d.cmd == nil {
		return
	}
	proc.Stop(d.cmd.Process, syscall.SIGTERM, d.done, grace)
	d.cmd = nil
}

// logTail is the end (4000 bytes at the most) of each log file that exists,
// headed by its name, for failure messages.
func logTail(paths ...string) string {
	var b []byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		b = append(b, "--- "+filepath.Base(p)+" ---\n"...)
		b = append(b, data...)
		b = append(b, '\n')
	}
	return string(b)
}
