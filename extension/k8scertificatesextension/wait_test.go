package k8scertificatesextension

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// TestWaitForFiles: Start's wait returns once the file has content (the
// kubelet filled the volume), and after wait_timeout when it never does.
func TestWaitForFiles(t *testing.T) {
	f := filepath.Join(t.TempDir(), "tls.crt")
	c := &certificates{cfg: Config{WaitForFiles: []string{f}, WaitTimeout: 30 * time.Second}, logger: zaptest.NewLogger(t)}
	go func() {
		time.Sleep(1500 * time.Millisecond)
		_ = os.WriteFile(f, []byte("pem"), 0o600)
	}()
	start := time.Now()
	c.waitForFiles(context.Background())
	if d := time.Since(start); d < time.Second || d > 10*time.Second {
		t.Errorf("returned after %s; want soon after the file appeared (1.5 s)", d)
	}

	c.cfg.WaitForFiles, c.cfg.WaitTimeout = []string{filepath.Join(t.TempDir(), "never")}, 1500*time.Millisecond
	start = time.Now()
	c.waitForFiles(context.Background())
	if d := time.Since(start); d < 1500*time.Millisecond || d > 10*time.Second {
		t.Errorf("with the file missing, returned after %s; want wait_timeout (1.5 s)", d)
	}
}
