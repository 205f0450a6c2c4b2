package chserver

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// zooKeeperJars is the class path of Debian's zookeeper package (its jar's
// manifest names the libraries it needs).
// The log4j binding writes its log to the console (zookeeper.log in Dir).
var zooKeeperJars = []string{"/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"}

// ZooKeeper is a running standalone ZooKeeper, which replicated tables and
// distributed DDL need.
type ZooKeeper struct {
	Dir  string
	Port int

	daemon
}

// startZooKeeper starts a standalone ZooKeeper (Debian's zookeeper package,
// on the JRE it depends on) in a temp dir on a free port, and stops it in
// tb.Cleanup.
func startZooKeeper(tb testing.TB) *ZooKeeper {
	tb.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		tb.Fatal("java is not installed (apt-get install zookeeper, which depends on a JRE)")
	}
	for _, j := range zooKeeperJars {
		if _, err := os.Stat(j); err != nil {
			tb.Fatalf("ZooKeeper is not installed (apt-get install zookeeper): %v", err)
		}
	}
	z := &ZooKeeper{Dir: tb.TempDir(), Port: freePort(tb)}
	cfg := fmt.Sprintf("tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s/data\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n", z.Dir, z.Port)
	if err := os.WriteFile(filepath.Join(z.Dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(z.Dir, "zookeeper.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cp := "/etc/zookeeper/conf"
	for _, j := range zooKeeperJars {
		cp += ":" + j
	}
	// A small heap: the tests keep a few hundred znodes.
	cmd := exec.Command(java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp,
		"-Dzookeeper.root.logger=INFO,CONSOLE", "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(z.Dir, "zoo.cfg"))
	cmd.Dir = z.Dir
	if err := z.run(cmd, logf); err != nil {
		tb.Fatalf("chserver: start ZooKeeper: %v", err)
	}
	tb.Cleanup(func() { z.stop(10 * time.Second) })

	for deadline := time.Now().Add(60 * time.Second); !z.ok(); time.Sleep(100 * time.Millisecond) {
		if exited, err := z.exited(); exited {
			tb.Fatalf("chserver: ZooKeeper exited during start-up: %v\n%s", err, z.logTail())
		}
		if time.Now().After(deadline) {
			tb.Fatalf("chserver: ZooKeeper not ready after 60s\n%s", z.logTail())
		}
	}
	return z
}

// ok reports whether ZooKeeper serves requests: its answer to the srvr
// command names its mode. (It answers ruok with imok before it serves.)
func (z *ZooKeeper) ok() bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", z.Port), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return strings.Contains(string(b), "Mode: ")
}

// logTail is the end of ZooKeeper's log, for failure messages.
func (z *ZooKeeper) logTail() string { return logTail(filepath.Join(z.Dir, "zookeeper.log")) }
