package filestorageextension

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// holdEnv makes TestHoldHelper a lock holder: a second collector on the same
// directory, in another process (the test binary run again).
const holdEnv = "FLOWTEL_TEST_HOLD_STORAGE_DIR"

// TestHoldHelper is the holding process of startHolder; it does nothing in a
// test run.
func TestHoldHelper(t *testing.T) {
	dir := os.Getenv(holdEnv)
	if dir == "" {
		t.Skip("the lock holder of the tests below, run by them in another process")
	}
	os.Exit(hold(dir))
}

// clients are the storage clients a node collector opens: the load_balancing
// exporter's persistent sending queue (exporterhelper asks for it under the
// signal's name) and the conntrack receiver's checkpoint, with the files
// contrib names them by.
var clients = []struct {
	kind component.Kind
	id   component.ID
	name string
	file string
}{
	{component.KindExporter, component.MustNewID("load_balancing"), "logs", "exporter_load_balancing__logs"},
	{component.KindReceiver, component.MustNewID("conntrack"), "", "receiver_conntrack_"},
}

// hold opens every client of clients in dir with this package's extension,
// as a node collector does, says "ready" and holds them until stdin closes.
func hold(dir string) int {
	ext := newExtension(nil, dir)
	ctx := context.Background()
	if err := ext.Start(ctx, componenttest.NewNopHost()); err != nil {
		fmt.Println(err)
		return 1
	}
	for _, c := range clients {
		cl, err := ext.(storage.Extension).GetClient(ctx, c.kind, c.id, c.name)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer cl.Close(ctx)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

func newExtension(t *testing.T, dir string) component.Component {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	cfg.Timeout = 300 * time.Millisecond
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if t != nil {
		require.NoError(t, err)
	} else if err != nil {
		panic(err)
	}
	return ext
}

// holder is a lock-holding process.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startHolder runs the test binary as a holder of dir's storage files (with
// env added to its environment) and waits until it holds them.
func startHolder(t *testing.T, dir string, env ...string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldHelper$")
	cmd.Env = append(append(os.Environ(), holdEnv+"="+dir), env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(h.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line, "the holder did not take the locks")
	return h
}

func (h *holder) stop() {
	if h.stdin != nil {
		h.stdin.Close()
		h.stdin = nil
		_ = h.cmd.Wait()
	}
}

// Two collectors on one directory: the second one's error names the file
// of each client, the process holding it (visible here: its PID and command
// line), the Pod its note names, and what to do. Contrib's extension alone
// returns bbolt's bare "timeout" for both.
func TestLockHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	h := startHolder(t, dir, "POD_NAMESPACE=flowtel-b", "K8S_POD_NAME=lab-flowtel-node-x7k2p")
	ext := newExtension(t, dir)
	ctx := context.Background()
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(t, ext.Shutdown(ctx)) }()
	se := ext.(storage.Extension)
	for _, c := range clients {
		_, err := se.GetClient(ctx, c.kind, c.id, c.name)
		require.Error(t, err, c.file)
		msg := err.Error()
		t.Log(msg)
		assert.Contains(t, msg, "another process holds the lock on the storage file "+filepath.Join(dir, c.file)+":")
		assert.Contains(t, msg, fmt.Sprintf("pid %d (%q)", h.cmd.Process.Pid, os.Args[0]+" -test.run=^TestHoldHelper$"))
		assert.Contains(t, msg, "Pod flowtel-b/lab-flowtel-node-x7k2p")
		assert.Contains(t, msg, `(got "timeout" after 300ms)`)
		assert.Contains(t, msg, "give each its own")
	}

	// The lock was the only problem: once the other process is gone, the
	// same files open, with what it stored.
	h.stop()
	for _, c := range clients {
		cl, err := se.GetClient(ctx, c.kind, c.id, c.name)
		require.NoError(t, err, c.file)
		require.NoError(t, cl.Close(ctx))
	}
}

// The extension is contrib's otherwise: a client stores and reads back, and
// the note it leaves while it holds the directory is gone after Shutdown.
func TestStoresAsContribDoes(t *testing.T) {
	dir := t.TempDir()
	ext := newExtension(t, dir)
	ctx := context.Background()
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	cl, err := ext.(storage.Extension).GetClient(ctx, component.KindReceiver, component.MustNewID("conntrack"), "")
	require.NoError(t, err)
	require.NoError(t, cl.Set(ctx, "k", []byte("v")))
	v, err := cl.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []byte("v"), v)
	assert.FileExists(t, filepath.Join(dir, "receiver_conntrack_"))
	n, ok := readNote(dir)
	require.True(t, ok, "no holder note")
	assert.Equal(t, os.Getpid(), n.PID)
	require.NoError(t, cl.Close(ctx))
	require.NoError(t, ext.Shutdown(ctx))
	assert.NoFileExists(t, filepath.Join(dir, noteFile))
}

func TestParseLocks(t *testing.T) {
	raw := []byte(strings.Join([]string{
		"1: FLOCK  ADVISORY  WRITE 4242 fd:01:131090 0 EOF",
		"1: -> FLOCK  ADVISORY  WRITE 4343 fd:01:131090 0 EOF",
		"2: POSIX  ADVISORY  WRITE 0 00:1a:77 0 EOF",
		"3: OFDLCK ADVISORY  READ  -1 08:02:9 0 EOF",
		"garbage",
	}, "\n"))
	assert.Equal(t, []procLock{
		{4242, fileID{0xfd, 1, 131090}},
		{0, fileID{0, 0x1a, 77}},
		{-1, fileID{8, 2, 9}},
	}, parseLocks(raw))
}

func TestDescribeHolders(t *testing.T) {
	assert.Contains(t, describeHolders(nil), "a process this container cannot see")
	assert.Equal(t, "a process outside this container's PID namespace", describeHolders([]lockHolder{{pid: 0}}))
	assert.Contains(t, describeHolders([]lockHolder{{pid: 7, self: true}}), "this collector (pid 7) holds it already")
	assert.Equal(t, `pid 9 ("otelcol --config=x"), cgroup /kubepods.slice/pod1`,
		describeHolders([]lockHolder{{pid: 9, cmd: "otelcol --config=x", cgroup: "/kubepods.slice/pod1"}}))
}
