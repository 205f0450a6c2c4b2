//go:build integration

package images

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The images load into a real containerd, unpacked, under the names the
// manifests use, and run: the collector binary starts, the echo server
// answers its client and stops on SIGTERM, and so does pause as its
// non-root user.
func TestImportIntoContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("containerd and its containers need root (CI runs as root)")
	}
	for _, tool := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install Debian's containerd package (it brings ctr and runc): %v", tool, err)
		}
	}
	root := RepoRoot()
	if bin := filepath.Join(root, "_build", "flowtel-node", "flowtel-node"); !exists(bin) {
		t.Fatalf("the flowtel-node image copies %s, which is not built: run `make build`", bin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	dir := t.TempDir()
	node, err := FromDockerfile(root, "flowtel-node")
	require.NoError(t, err)
	pause, err := Pause(ctx, dir)
	require.NoError(t, err)
	echo, err := Echo(ctx, dir)
	require.NoError(t, err)
	var tars []string
	for _, img := range []Image{node, pause, echo} {
		p, err := Save(dir, img)
		require.NoError(t, err)
		tars = append(tars, p)
	}

	cd := startContainerd(t)
	require.NoError(t, Import(ctx, cd.address, tars...))

	listed := strings.Fields(cd.ctr(t, "images", "ls", "-q"))
	// images check: REF TYPE DIGEST STATUS SIZE UNPACKED, one line per image.
	unpacked := map[string]string{}
	for _, line := range strings.Split(cd.ctr(t, "images", "check"), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			unpacked[f[0]] = f[len(f)-1]
		}
	}
	for _, name := range []string{node.Name, PauseImageName, EchoImageName} {
		assert.Contains(t, listed, name)
		assert.Equal(t, "true", unpacked[name], "%s unpacked", name)
	}

	// The collector's static binary runs from the image.
	out := cd.ctr(t, "run", "--rm", "--runc-root", cd.runcRoot, node.Name, cd.id("version"), "/flowtel-node", "--version")
	assert.Contains(t, out, "flowtel-node version")

	// The echo server (the image's default command) in a container's own
	// network namespace, its clients exec'd into the same container.
	srv := cd.id("echo")
	cd.ctr(t, "run", "--detach", "--null-io", "--runc-root", cd.runcRoot, echo.Name, srv)
	waitFor(t, func() bool {
		_, err := cd.run("tasks", "exec", "--exec-id", "probe", srv, "/echo", "client", "--http", "127.0.0.1:8080", "--bytes", "0")
		return err == nil
	})
	for _, args := range [][]string{
		{"--tcp", "127.0.0.1:8081", "--bytes", "100000"},
		{"--udp", "127.0.0.1:8081", "--bytes", "1200"},
		{"--http", "127.0.0.1:8080", "--bytes", "5000"},
	} {
		out := cd.ctr(t, append([]string{"tasks", "exec", "--exec-id", "client", srv, "/echo", "client"}, args...)...)
		assert.Contains(t, out, fmt.Sprintf("sent %s received %s", args[3], args[3]), args)
	}
	cd.stopsOnSIGTERM(t, srv)

	// pause as 65535:65535, and it exits on SIGTERM as a Pod sandbox must.
	sandbox := cd.id("pause")
	cd.ctr(t, "run", "--detach", "--null-io", "--runc-root", cd.runcRoot, pause.Name, sandbox)
	cd.stopsOnSIGTERM(t, sandbox)
}

// containerd is a throw-away containerd: its own socket, root and state
// directories under a test directory, stopped (and its containers removed)
// when the test ends, passed or not.
type containerd struct {
	address  string
	runcRoot string // for ctr run: runc's state here, not in /run/containerd
}

func startContainerd(t *testing.T) *containerd {
	dir := t.TempDir() // removed after the cleanup below, which stops containerd
	cd := &containerd{address: filepath.Join(dir, "containerd.sock"), runcRoot: filepath.Join(dir, "runc")}
	// No CRI plugin: importing and running with ctr do not need it, and it
	// would want CNI and a streaming port. opt's default is /opt/containerd.
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), cd.address, filepath.Join(dir, "opt"))
	configPath := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(configPath, []byte(config), 0o600))
	logPath := filepath.Join(dir, "containerd.log")
	log, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command("containerd", "--config", configPath)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(exited) }()
	t.Cleanup(func() {
		// Containers first: their shims and processes would outlive
		// containerd, and their mounts would keep the directory.
		if ids, err := cd.run("containers", "ls", "-q"); err == nil {
			for _, id := range strings.Fields(ids) {
				cd.run("tasks", "delete", "--force", id)
				cd.run("containers", "delete", id)
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("containerd log:\n%s", b)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := cd.run("version"); err == nil {
			return cd
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("containerd exited: %v\n%s", cmd.ProcessState, b)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not serve %s within 20s", cd.address)
		}
	}
}

// id is a container name unique on this machine: the containers' cgroups are
// the machine's, shared with any other containerd in namespace k8s.io.
func (cd *containerd) id(name string) string {
	return fmt.Sprintf("flowtel-images-%s-%d", name, os.Getpid())
}

func (cd *containerd) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", cd.address, "--namespace", Namespace}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (cd *containerd) ctr(t *testing.T, args ...string) string {
	t.Helper()
	out, err := cd.run(args...)
	require.NoError(t, err)
	return out
}

// stopsOnSIGTERM sends the task SIGTERM (ctr's default) and requires it to
// exit with status 0 soon: a PID 1 without a handler would ignore it.
func (cd *containerd) stopsOnSIGTERM(t *testing.T, id string) {
	t.Helper()
	cd.ctr(t, "tasks", "kill", id)
	waitFor(t, func() bool {
		out, _ := cd.run("tasks", "ls")
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == id {
				return f[2] == "STOPPED"
			}
		}
		return false
	})
	// ctr exits with the task's status.
	cd.ctr(t, "tasks", "delete", id)
	cd.ctr(t, "containers", "delete", id)
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not within 10s")
		}
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
