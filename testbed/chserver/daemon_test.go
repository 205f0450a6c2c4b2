package chserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDaemonRunStop(t *testing.T) {
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "d.log"))
	if err != nil {
		t.Fatal(err)
	}
	var d daemon
	if err := d.run(exec.Command("sh", "-c", "echo started; exec sleep 30"), logf); err != nil {
		t.Fatal(err)
	}
	if exited, err := d.exited(); exited {
		t.Fatalf("a running daemon reported exited (%v)", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(dir, "d.log")); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon's output never reached its log")
		}
	}
	d.stop(10 * time.Second)
	if d.cmd != nil {
		t.Fatal("cmd still set after stop")
	}
	d.stop(time.Second) // a no-op once stopped
	if tail := logTail(filepath.Join(dir, "d.log"), filepath.Join(dir, "missing.log")); tail != "--- d.log ---\nstarted\n\n" {
		t.Fatalf("logTail = %q", tail)
	}
}

func TestDaemonExited(t *testing.T) {
	logf, err := os.Create(filepath.Join(t.TempDir(), "d.log"))
	if err != nil {
		t.Fatal(err)
	}
	var d daemon
	if err := d.run(exec.Command("sh", "-c", "exit 3"), logf); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		exited, err := d.exited()
		if exited {
			if err == nil || !strings.Contains(err.Error(), "exit status 3") || d.cmd != nil {
				t.Fatalf("exited with %v, cmd %v; want exit status 3 and no cmd", err, d.cmd)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a daemon that exited at once was not reported exited")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDaemonRunFails(t *testing.T) {
	logf, err := os.Create(filepath.Join(t.TempDir(), "d.log"))
	if err != nil {
		t.Fatal(err)
	}
	var d daemon
	if err := d.run(exec.Command(filepath.Join(t.TempDir(), "no-such-binary")), logf); err == nil || d.cmd != nil {
		t.Fatalf("run of a missing binary: %v, cmd %v", err, d.cmd)
	}
	if err := logf.Close(); err == nil {
		t.Fatal("the log file was left open after a failed start")
	}
}

func TestLogTailKeepsTheEnd(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.log")
	if err := os.WriteFile(p, []byte(strings.Repeat("a", 5000)+"END"), 0o644); err != nil {
		t.Fatal(err)
	}
	tail := logTail(p)
	if !strings.HasPrefix(tail, "--- big.log ---\n") || !strings.HasSuffix(tail, "END\n") || len(tail) != len("--- big.log ---\n")+4000+1 {
		t.Fatalf("logTail of a 5003-byte file: %d bytes, %q…", len(tail), tail[:40])
	}
}
