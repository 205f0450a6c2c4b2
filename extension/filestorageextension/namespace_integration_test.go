//go:build integration

package filestorageextension

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"golang.org/x/sys/unix"
)

// Two collectors in two Pods on one Node: neither sees the other's process,
// and /proc/locks (as a container's /proc shows it, from its own PID
// namespace) does not list the other's locks at all. The error still names
// the file, says the holder is a process this container cannot see, and
// names its Pod from the note the holder left in the directory.
func TestLockHeldFromAnotherContainer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a PID namespace and mounts its /proc (CI runs as root)")
	}
	dir := t.TempDir()
	startHolder(t, dir, "POD_NAMESPACE=flowtel-b", "K8S_POD_NAME=lab-flowtel-node-x7k2p")

	// A /proc from a new PID namespace, as a container has: mounted by a
	// process that is PID 1 there, in this mount namespace, so this test
	// reads it.
	proc := filepath.Join(t.TempDir(), "proc")
	require.NoError(t, os.Mkdir(proc, 0o755))
	ns := exec.Command("/bin/sh", "-c", `mount -t proc proc "$0" && echo mounted && exec sleep 600`, proc)
	ns.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	out, err := ns.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, ns.Start())
	t.Cleanup(func() {
		_ = unix.Unmount(proc, unix.MNT_DETACH)
		_ = ns.Process.Kill()
		_ = ns.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "mounted\n", line)
	saved := procRoot
	procRoot = proc
	t.Cleanup(func() { procRoot = saved })

	ext := newExtension(t, dir)
	ctx := context.Background()
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(t, ext.Shutdown(ctx)) }()
	for _, c := range clients {
		_, err := ext.(storage.Extension).GetClient(ctx, c.kind, c.id, c.name)
		require.Error(t, err, c.file)
		msg := err.Error()
		t.Log(msg)
		assert.Contains(t, msg, "another process holds the lock on the storage file "+filepath.Join(dir, c.file)+":")
		assert.Contains(t, msg, "a process this container cannot see")
		assert.Contains(t, msg, "the collector that last opened storage there: Pod flowtel-b/lab-flowtel-node-x7k2p")
		assert.Contains(t, msg, "give each its own")
	}
}
