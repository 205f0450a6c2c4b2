package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func start(t *testing.T, script string) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, exited
}

func TestStopGraceful(t *testing.T) {
	cmd, exited := start(t, "exec sleep 30")
	began := time.Now()
	if Stop(cmd.Process, syscall.SIGTERM, exited, 10*time.Second) {
		t.Fatal("a process that ends on SIGTERM was killed")
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("Stop took %s for a process that ends on SIGTERM", d)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("process state %v, want ended by SIGTERM", cmd.ProcessState)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	// The shell ignores SIGTERM, and exec keeps an ignored signal ignored.
	cmd, exited := start(t, `trap "" TERM; exec sleep 30`)
	time.Sleep(200 * time.Millisecond) // let the trap be set
	if !Stop(cmd.Process, syscall.SIGTERM, exited, 300*time.Millisecond) {
		t.Fatal("a process that ignores SIGTERM was not reported killed")
	}
	if cmd.ProcessState == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("process state %v, want killed", cmd.ProcessState)
	}
}

func TestRunBuildScript(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "pkg.go")
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(dir, "build.sh"), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("echo '  /some/bin  '\n")
	got, err := RunBuildScript(self, "the peers")
	if err != nil || got != "/some/bin" {
		t.Fatalf("RunBuildScript = %q, %v; want /some/bin", got, err)
	}
	write("echo broken >&2; exit 3\n")
	_, err = RunBuildScript(self, "the peers")
	if err == nil {
		t.Fatal("a failing build.sh gave no error")
	}
	for _, want := range []string{"building the peers with " + filepath.Join(dir, "build.sh"), "exit status 3", "broken"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestBuildScriptRunsOnce(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "runs")
	script := "#!/bin/sh\necho x >> " + count + "\necho " + dir + "/bin\n"
	if err := os.WriteFile(filepath.Join(dir, "build.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var b BuildScript
	for i := 0; i < 3; i++ {
		got, err := b.Dir(filepath.Join(dir, "pkg.go"), "the peers")
		if err != nil || got != dir+"/bin" {
			t.Fatalf("call %d: Dir = %q, %v", i, got, err)
		}
	}
	runs, err := os.ReadFile(count)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(runs), "x"); n != 1 {
		t.Fatalf("build.sh ran %d times, want once", n)
	}
}
