// Package collector runs flowtel's built distributions as child processes, the
// way users run them: a binary, config files, environment variables. It waits
// for the health_check extension before returning and stops the process with
// SIGTERM so the collector shuts down gracefully (flushing what it holds).
package collector

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flowtel/flowtel/testbed/ports"
	"github.com/flowtel/flowtel/testbed/proc"
)

// Binary returns the path of a distribution built by `make build`.
func Binary(repoRoot, distribution string) (string, error) {
	p := filepath.Join(repoRoot, "_build", distribution, distribution)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is not built (run `make build`): %w", distribution, err)
	}
	return p, nil
}

// Process is one running collector.
type Process struct {
	Name       string
	cmd        *exec.Cmd
	logPath    string
	healthURL  string
	metricsURL string
	done       chan struct{}
	waitErr    error
	mu         sync.Mutex
}

// Options describe a collector to start.
type Options struct {
	Name   string // for logs and errors
	Binary string
	// Configs are configuration files given first, e.g. a distribution's
	// shipped config.yaml; Config, written to a file, comes last. The collector
	// merges them in order (maps merge, lists replace).
	Configs []string
	Config  string // YAML; ${env:X} references are resolved by the collector
	Env     []string
	Dir     string // where the config and the log are written
	// HealthPort and MetricsPort are the health_check and Prometheus telemetry
	// ports the config uses (FreePort picks them); 0 skips the wait / scrape.
	HealthPort  int
	MetricsPort int
}

// Start writes Config, starts the collector on Configs and Config, and waits until health_check
// reports it ready (or it exits, or the context ends).
func Start(ctx context.Context, o Options) (*Process, error) {
	cfgPath := filepath.Join(o.Dir, o.Name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(o.Config), 0o600); err != nil {
		return nil, err
	}
	p := &Process{Name: o.Name, logPath: filepath.Join(o.Dir, o.Name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	var args []string
	for _, c := range append(append([]string{}, o.Configs...), cfgPath) {
		args = append(args, "--config", c)
	}
	p.cmd = exec.Command(o.Binary, args...)
	p.cmd.Env = append(os.Environ(), o.Env...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", o.Name, err)
	}
	go func() {
		err := p.cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	if o.MetricsPort != 0 {
		p.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", o.MetricsPort)
	}
	if o.HealthPort == 0 {
		return p, nil
	}
	p.healthURL = fmt.Sprintf("http://127.0.0.1:%d/", o.HealthPort)
	if err := p.waitHealthy(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Process) waitHealthy(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready: %v\n%s", p.Name, p.exitErr(), p.LogTail(40))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w\n%s", p.Name, ctx.Err(), p.LogTail(40))
		case <-tick.C:
			resp, err := http.Get(p.healthURL)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
	}
}

func (p *Process) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Stop sends SIGTERM and waits up to 20 s for a graceful exit, then kills.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		return p.exitErr()
	default:
	}
	if proc.Stop(p.cmd.Process, syscall.SIGTERM, p.done, 20*time.Second) {
		return fmt.Errorf("%s did not stop within 20s", p.Name)
	}
	var exit *exec.ExitError
	if err := p.exitErr(); err != nil && !errors.As(err, &exit) {
		return err
	}
	return nil
}

// Pid is the collector's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// CPUTime is the CPU time (user + system) the collector process has used, from
// /proc/<pid>/stat: for load runs that measure a collector's share of a core.
func (p *Process) CPUTime() (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start after ") ".
	_, rest, ok := strings.Cut(string(raw), ") ")
	if !ok {
		return 0, fmt.Errorf("%s: unexpected /proc stat format", p.Name)
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: short /proc stat", p.Name)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

// RSS is the collector process's resident memory, from /proc/<pid>/status.
func (p *Process) RSS() (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("%s: no VmRSS", p.Name)
}

// Log returns the collector's whole output.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// LogTail returns the last n lines of the collector's output.
func (p *Process) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)`)

// Metrics scrapes the collector's Prometheus telemetry endpoint and returns the
// samples whose name starts with prefix, keyed "name{labels}".
func (p *Process) Metrics(prefix string) (map[string]float64, error) {
	if p.metricsURL == "" {
		return nil, fmt.Errorf("%s: no metrics port configured", p.Name)
	}
	resp, err := http.Get(p.metricsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseSamples(resp.Body, prefix)
}

func parseSamples(r io.Reader, prefix string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, prefix) {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		out[m[1]+m[2]] += v
	}
	return out, sc.Err()
}

// FreePort returns a TCP port on 127.0.0.1 for a collector to listen on
// (see package ports for why not Listen(":0")).
func FreePort() (int, error) { return ports.Free() }
