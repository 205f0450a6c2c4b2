package ipfixexporter

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The go-ipfix v0.17.0 collector (github.com/vmware/go-ipfix/cmd/collector) is
// built once per test binary in a throw-away module, so its dependencies never
// enter flowtel's go.mod. It serves what it decoded on :8080/records, a port it
// hard-codes, so each collector runs in a network namespace of its own.

var (
	collectorOnce sync.Once
	collectorBin  string
	collectorErr  error
	collectorDir  string
)

func cleanupCollectorBuild() {
	if collectorDir != "" {
		_ = os.RemoveAll(collectorDir)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
}

func goIPFIXCollector(t *testing.T) string {
	t.Helper()
	collectorOnce.Do(func() {
		collectorDir, collectorErr = os.MkdirTemp("", "flowtel-ipfix-collector-")
		if collectorErr != nil {
			return
		}
		files := map[string]string{
			"go.mod":   "module ipfixcollectorbuild\n\ngo 1.26.0\n\nrequire github.com/vmware/go-ipfix v0.17.0\n",
			"tools.go": "//go:build tools\n\npackage tools\n\nimport _ \"github.com/vmware/go-ipfix/cmd/collector\"\n",
		}
		for name, content := range files {
			if collectorErr = os.WriteFile(filepath.Join(collectorDir, name), []byte(content), 0o644); collectorErr != nil {
				return
			}
		}
		collectorBin = filepath.Join(collectorDir, "ipfix-collector")
		cmd := exec.Command("go", "build", "-o", collectorBin, "github.com/vmware/go-ipfix/cmd/collector")
		cmd.Dir = collectorDir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			collectorErr = fmt.Errorf("building the go-ipfix collector: %v\n%s", err, out)
		}
	})
	if collectorErr != nil {
		t.Fatal(collectorErr)
	}
	return collectorBin
}

// netns is a network namespace created for one test, with loopback up.
type netns struct {
	name string
	path string
}

func newNetns(t *testing.T) *netns {
	t.Helper()
	requireRoot(t)
	name := fmt.Sprintf("flowtel-ipfix-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	return &netns{name: name, path: "/run/netns/" + name}
}

// do runs fn on a thread switched into the namespace; sockets fn creates live there.
func (n *netns) do(fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open(n.path)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it dies with the goroutine instead of serving others.
		return fmt.Errorf("returning to the original namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

// dialer returns the exporter's own dialCollector, run inside the namespace.
func (n *netns) dialer() dialFunc {
	return func(ctx context.Context, network, address string, tlsCfg *tls.Config) (net.Conn, error) {
		var c net.Conn
		err := n.do(func() error {
			var err error
			c, err = dialCollector(ctx, network, address, tlsCfg)
			return err
		})
		return c, err
	}
}

// goCollector is a running go-ipfix collector.
type goCollector struct {
	ns   *netns
	cmd  *exec.Cmd
	port int
	args []string
	log  *strings.Builder
}

func startGoCollector(t *testing.T, ns *netns, transport string, port int, extra ...string) *goCollector {
	t.Helper()
	bin := goIPFIXCollector(t)
	c := &goCollector{ns: ns, port: port, log: &strings.Builder{},
		args: append([]string{"netns", "exec", ns.name, bin, "--ipfix.addr", "127.0.0.1",
			"--ipfix.port", fmt.Sprint(port), "--ipfix.transport", transport}, extra...)}
	c.start(t)
	return c
}

func (c *goCollector) start(t *testing.T) {
	t.Helper()
	c.cmd = exec.Command("ip", c.args...)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := c.cmd
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Ready when its HTTP API answers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.records(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("go-ipfix collector did not start: %s", c.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *goCollector) stop(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// decoded is one data record as the collector decoded it.
type decoded struct {
	ObsDomainID uint32 `json:"obsDomainID"`
	TemplateID  uint16 `json:"templateID"`
	RecordIdx   int32  `json:"recordIdx"`
	SequenceNum uint32 `json:"sequenceNumber"`
	Data        string `json:"data"`
	// Fields are the IEs in the order the collector listed them.
	Names  []string
	Fields map[string]string
}

func (c *goCollector) records() ([]decoded, error) {
	var body struct {
		FlowRecords []decoded `json:"flowRecords"`
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var conn net.Conn
			err := c.ns.do(func() error {
				var err error
				conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		},
		DisableKeepAlives: true,
	}}
	resp, err := client.Get("http://127.0.0.1:8080/records")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	for i := range body.FlowRecords {
		r := &body.FlowRecords[i]
		r.Fields = map[string]string{}
		for _, line := range strings.Split(r.Data, "\n") {
			name, value, ok := strings.Cut(strings.TrimSpace(line), ": ")
			if !ok {
				if n, found := strings.CutSuffix(strings.TrimSpace(line), ":"); found {
					name, value, ok = n, "", true
				}
			}
			if ok {
				r.Names = append(r.Names, name)
				r.Fields[name] = strings.TrimSpace(value)
			}
		}
	}
	return body.FlowRecords, nil
}

// waitRecords polls until the collector holds at least n records.
func (c *goCollector) waitRecords(t *testing.T, n int) []decoded {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, err := c.records()
		if err == nil && len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector has %d records, want %d (err %v); log:\n%s", len(recs), n, err, c.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	// Inside a fresh namespace every port is free; pick a fixed, unusual one.
	return 14739
}
