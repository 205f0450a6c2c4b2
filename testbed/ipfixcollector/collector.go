package ipfixcollector

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowtel/flowtel/testbed/proc"
)

// APIPort is the port of the collector's HTTP API, hard-coded by go-ipfix.
const APIPort = 8080

// DefaultPort is the IPFIX port the collector listens on unless told otherwise.
const DefaultPort = 4739

// Options configure a collector. The zero value is a TCP collector on
// 127.0.0.1:4739 in a namespace of its own.
type Options struct {
	// Transport is "tcp" (default) or "udp". For TLS use "tcp" with TLS set.
	Transport string
	// Address to listen on; default 127.0.0.1 (the namespace's loopback).
	Address string
	// Port to listen on; default DefaultPort.
	Port int
	// Netns runs the collector in an existing namespace (at most one collector
	// per namespace: the API port is fixed); nil creates one for the test.
	Netns *Netns
	// TLS makes the collector accept TLS (over TCP) only.
	TLS *TLS
	// DecodingMode is go-ipfix's --decoding-mode (Strict, LenientKeepUnknown,
	// LenientDropUnknown); empty keeps its default, Strict.
	DecodingMode string
	// Args are passed on to the collector as they are.
	Args []string
}

// TLS holds PEM file paths for a TLS collector.
type TLS struct {
	ServerCert, ServerKey string
	// ClientCA, when set, makes the collector require client certificates
	// signed by it (mutual TLS).
	ClientCA string
}

// Collector is a running go-ipfix collector.
type Collector struct {
	ns       *Netns
	endpoint string
	args     []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	log    *logBuffer
}

// Start builds (once) and starts a collector and waits until its HTTP API
// answers. It is stopped when the test ends.
func Start(t testing.TB, o Options) *Collector {
	t.Helper()
	RequireRoot(t)
	bin := Build(t)
	if o.Transport == "" {
		o.Transport = "tcp"
	}
	if o.Transport != "tcp" && o.Transport != "udp" {
		t.Fatalf("ipfixcollector: transport %q: want tcp or udp", o.Transport)
	}
	if o.Address == "" {
		o.Address = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.Netns == nil {
		o.Netns = NewNetns(t)
	}
	args := []string{"--ipfix.addr", o.Address, "--ipfix.port", strconv.Itoa(o.Port), "--ipfix.transport", o.Transport}
	if o.TLS != nil {
		args = append(args, "--server-cert", o.TLS.ServerCert, "--server-key", o.TLS.ServerKey)
		if o.TLS.ClientCA != "" {
			args = append(args, "--client-ca", o.TLS.ClientCA)
		}
	}
	if o.DecodingMode != "" {
		args = append(args, "--decoding-mode", o.DecodingMode)
	}
	c := &Collector{
		ns:       o.Netns,
		endpoint: net.JoinHostPort(o.Address, strconv.Itoa(o.Port)),
		args:     append(append([]string{bin}, args...), o.Args...),
	}
	c.Restart(t)
	return c
}

// Endpoint is the collector's host:port, reachable from inside Netns.
func (c *Collector) Endpoint() string { return c.endpoint }

// Netns is the namespace the collector runs in; dial it from there.
func (c *Collector) Netns() *Netns { return c.ns }

// Log is what the collector printed so far (stdout and stderr).
func (c *Collector) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// Restart starts the collector (again, after Stop) with the same options and
// an empty record store, and waits until its HTTP API answers.
func (c *Collector) Restart(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	if c.cmd != nil {
		c.mu.Unlock()
		t.Fatal("ipfixcollector: Restart of a running collector; Stop it first")
	}
	c.log = &logBuffer{}
	cmd := c.ns.Command(c.args[0], c.args[1:]...)
	cmd.Stdout, cmd.Stderr = c.log, c.log
	if err := cmd.Start(); err != nil {
		c.mu.Unlock()
		t.Fatalf("starting the go-ipfix collector: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.cmd, c.exited = cmd, exited
	c.mu.Unlock()
	t.Cleanup(func() { stop(cmd, exited) })

	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := c.Records(); err == nil {
			return
		}
		select {
		case <-exited:
			t.Fatalf("go-ipfix collector exited at start: %s", c.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("go-ipfix collector's API did not answer within 15s: %s", c.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the collector (SIGINT, then SIGKILL after 5 s); its connections
// close and the records it held are gone. Restart starts it again.
func (c *Collector) Stop() {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.cmd = nil
	c.mu.Unlock()
	if cmd != nil {
		stop(cmd, exited)
	}
}

// Kill kills the collector at once (SIGKILL), as a crash would.
func (c *Collector) Kill() {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.cmd = nil
	c.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-exited
	}
}

func stop(cmd *exec.Cmd, exited chan struct{}) {
	select {
	case <-exited:
		return
	default:
	}
	proc.Stop(cmd.Process, os.Interrupt, exited, 5*time.Second)
}

// Records returns the data records the collector decoded so far, oldest first.
func (c *Collector) Records() ([]Record, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.ns.DialContext(ctx, network, addr)
		},
		DisableKeepAlives: true,
	}}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/records", APIPort))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("go-ipfix collector API: %s", resp.Status)
	}
	var body struct {
		FlowRecords []Record `json:"flowRecords"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("go-ipfix collector API: %w", err)
	}
	for i := range body.FlowRecords {
		body.FlowRecords[i].parse()
	}
	return body.FlowRecords, nil
}

// WaitRecords polls until the collector holds at least n records and returns
// them; after timeout it fails the test with the count and the collector's log.
func (c *Collector) WaitRecords(t testing.TB, n int, timeout time.Duration) []Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		recs, err := c.Records()
		if err == nil && len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("go-ipfix collector has %d records after %s, want %d (last error: %v); log:\n%s",
				len(recs), timeout, n, err, c.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logBuffer collects a process's output; the process writes while tests read.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
