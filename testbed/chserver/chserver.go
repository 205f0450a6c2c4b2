// Package chserver runs a real clickhouse-server for tests and benchmarks: a
// throw-away data directory, free ports on 127.0.0.1, and users the tests need
// (default without a password, flowtel with one). Test support, shared by the
// clickhouse_flows exporter's tests and the end-to-end testbed.
package chserver

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flowtel/flowtel/testbed/ports"
)

// Users the server knows.
const (
	User     = "flowtel"
	Password = "s3cret-flowtel"
)

// Server is a running (or stopped) clickhouse-server.
type Server struct {
	Dir      string
	TCPPort  int
	HTTPPort int
	// TLSPort is the native protocol over TLS, when started WithTLS.
	TLSPort int

	binary string
	daemon
	tb testing.TB
}

// Options for Start.
type Options struct {
	// CertFile and KeyFile, when set, enable the secure native port (TLSPort).
	CertFile, KeyFile string
	// Cluster, when set, configures a one-shard, one-replica cluster of that
	// name (this server) in remote_servers and the macro {cluster} naming it,
	// for Distributed tables such as Theia's.
	Cluster string

	// extra is more server configuration (StartCluster's remote_servers,
	// zookeeper and macros).
	extra string
}

// Binary returns the clickhouse-server executable, or "" when it is not installed.
func Binary() string {
	for _, p := range []string{"/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return p
	}
	return ""
}

// Start starts a server and stops it in tb.Cleanup. It fails the test when
// the server is not installed: CI installs the clickhouse-server package.
func Start(tb testing.TB, o Options) *Server {
	tb.Helper()
	s := newServer(tb, o)
	s.writeConfig(o)
	s.Restart()
	return s
}

// newServer prepares a server's directory and ports, and stops it in
// tb.Cleanup; it is started by Restart once its configuration is written.
func newServer(tb testing.TB, o Options) *Server {
	tb.Helper()
	bin := Binary()
	if bin == "" {
		tb.Fatal("clickhouse-server is not installed (apt-get install clickhouse-server)")
	}
	s := &Server{Dir: tb.TempDir(), binary: bin, tb: tb,
		TCPPort: freePort(tb), HTTPPort: freePort(tb)}
	if o.CertFile != "" {
		s.TLSPort = freePort(tb)
	}
	for _, d := range []string{"data", "tmp", "user_files", "log", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(s.Stop)
	return s
}

// Addr is the native protocol address host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.TCPPort) }

// Endpoint is the exporter endpoint tcp://127.0.0.1:port.
func (s *Server) Endpoint() string { return "tcp://" + s.Addr() }

// startTimeout bounds a server's start-up. A server of a cluster loads its
// replicated tables from ZooKeeper before it listens, which on a loaded
// machine takes tens of seconds once the tests have created a few dozen.
const startTimeout = 2 * time.Minute

// Restart starts the server process (again) on the same ports and data, and
// waits until it answers.
func (s *Server) Restart() {
	s.tb.Helper()
	if s.cmd != nil {
		s.tb.Fatal("chserver: Restart while running")
	}
	s.launch()
	s.waitReady()
}

// launch starts the server process, its output appended to log/stdout.log.
func (s *Server) launch() {
	s.tb.Helper()
	logf, err := os.OpenFile(filepath.Join(s.Dir, "log", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.tb.Fatal(err)
	}
	s.start(logf)
}

// start starts the server process, writing its output to logf.
func (s *Server) start(logf *os.File) {
	cmd := exec.Command(s.binary, "--config-file="+filepath.Join(s.Dir, "config.xml"))
	cmd.Dir = s.Dir
	if err := s.run(cmd, logf); err != nil {
		s.tb.Fatalf("chserver: start %s: %v", s.binary, err)
	}
}

// waitReady waits until the started server answers on both ports.
func (s *Server) waitReady() {
	s.tb.Helper()
	deadline := time.Now().Add(startTimeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/ping", s.HTTPPort))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if exited, err := s.exited(); exited {
			s.tb.Fatalf("chserver: server exited during start-up: %v\n%s", err, s.logTail())
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.tb.Fatalf("chserver: server not ready after %s\n%s", startTimeout, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The native port opens with the HTTP one; dial it to be sure.
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.tb.Fatalf("chserver: native port %d not open", s.TCPPort)
}

// Pause stops the server's process with SIGSTOP, its connections open: the
// clients' queries hang, as behind a stalled disk or network, until Resume.
// (A test that pauses should register Resume as a cleanup.)
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server go on (SIGCONT); on a running one it does nothing.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Errorf("chserver: %v: %v", sig, err)
	}
}

// Stop stops the server gracefully (SIGTERM: running queries finish) and waits
// for it to exit; SIGKILL after 30 s. Stopping a stopped server is a no-op.
func (s *Server) Stop() { s.stop(30 * time.Second) }

func (s *Server) logTail() string {
	dir := filepath.Join(s.Dir, "log")
	return logTail(filepath.Join(dir, "stdout.log"), filepath.Join(dir, "server.err.log"), filepath.Join(dir, "server.log"))
}

func (s *Server) writeConfig(o Options) {
	extra := ""
	if o.CertFile != "" {
		extra = fmt.Sprintf(`<tcp_port_secure>%d</tcp_port_secure>
  <openSSL><server><certificateFile>%s</certificateFile><privateKeyFile>%s</privateKeyFile>
    <verificationMode>none</verificationMode><loadDefaultCAFile>false</loadDefaultCAFile>
    <cacheSessions>true</cacheSessions><disableProtocols>sslv2,sslv3</disableProtocols>
    <preferServerCiphers>true</preferServerCiphers></server></openSSL>`, s.TLSPort, o.CertFile, o.KeyFile)
	}
	if o.Cluster != "" {
		extra += fmt.Sprintf(`
  <remote_servers><%[1]s><shard><replica><host>127.0.0.1</host><port>%[2]d</port></replica></shard></%[1]s></remote_servers>
  <macros><cluster>%[1]s</cluster></macros>`, o.Cluster, s.TCPPort)
	}
	extra += o.extra
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger><level>information</level><log>%[1]s/log/server.log</log><errorlog>%[1]s/log/server.err.log</errorlog>
    <size>100M</size><count>2</count></logger>
  <http_port>%[2]d</http_port><tcp_port>%[3]d</tcp_port><listen_host>127.0.0.1</listen_host>
  %[4]s
  <max_connections>4096</max_connections><keep_alive_timeout>3</keep_alive_timeout>
  <max_concurrent_queries>100</max_concurrent_queries>
  <uncompressed_cache_size>268435456</uncompressed_cache_size><mark_cache_size>268435456</mark_cache_size>
  <path>%[1]s/data/</path><tmp_path>%[1]s/tmp/</tmp_path><user_files_path>%[1]s/user_files/</user_files_path>
  <format_schema_path>%[1]s/format_schemas/</format_schema_path>
  <users_config>%[1]s/users.xml</users_config>
  <default_profile>default</default_profile><default_database>default</default_database>
  <timezone>UTC</timezone><mlock_executable>false</mlock_executable>
</yandex>
`, s.Dir, s.HTTPPort, s.TCPPort, extra)
	users := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage><load_balancing>random</load_balancing></default></profiles>
  <users>
    <default><password></password><networks><ip>::1</ip><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default>
    <%[1]s><password>%[2]s</password><networks><ip>::1</ip><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></%[1]s>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`, User, Password)
	for name, content := range map[string]string{"config.xml": config, "users.xml": users} {
		if err := os.WriteFile(filepath.Join(s.Dir, name), []byte(content), 0o644); err != nil {
			s.tb.Fatal(err)
		}
	}
}

func freePort(tb testing.TB) int {
	p, err := ports.Free()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
