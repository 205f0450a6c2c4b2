package chserver

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ClusterOptions for StartCluster.
type ClusterOptions struct {
	// Name of the cluster in remote_servers (and of the macro {cluster}).
	Name string
	// Shards and Replicas per shard.
	Shards, Replicas int
}

// Cluster is a ClickHouse cluster on loopback ports: Shards x Replicas
// servers and one ZooKeeper they share, each server with the macros
// {cluster}, {shard} and {replica}, and distributed DDL (ON CLUSTER) on.
type Cluster struct {
	Name      string
	ZooKeeper *ZooKeeper
	// Servers[shard][replica], both counted from 0.
	Servers [][]*Server
}

// StartCluster starts the ZooKeeper and the servers, and stops them all in
// tb.Cleanup (also when the start fails half way).
func StartCluster(tb testing.TB, o ClusterOptions) *Cluster {
	tb.Helper()
	if o.Name == "" || o.Shards < 1 || o.Replicas < 1 {
		tb.Fatalf("chserver: cluster needs a name, shards and replicas (got %+v)", o)
	}
	c := &Cluster{Name: o.Name, ZooKeeper: startZooKeeper(tb)}
	c.Servers = make([][]*Server, o.Shards)
	for s := range c.Servers {
		c.Servers[s] = make([]*Server, o.Replicas)
		for r := range c.Servers[s] {
			c.Servers[s][r] = newServer(tb, Options{})
		}
	}
	// At the end, stop the servers all at once (their shutdowns, which
	// wait for replication threads, overlap); cleanups run last-in first,
	// so the servers' own Stops find them stopped.
	tb.Cleanup(c.stopAll)
	// Every server's configuration names every server, so the ports are
	// all known before the first configuration is written.
	var shards strings.Builder
	for _, replicas := range c.Servers {
		shards.WriteString("<shard><internal_replication>true</internal_replication>")
		for _, srv := range replicas {
			fmt.Fprintf(&shards, "<replica><host>127.0.0.1</host><port>%d</port></replica>", srv.TCPPort)
		}
		shards.WriteString("</shard>")
	}
	for s, replicas := range c.Servers {
		for r, srv := range replicas {
			// Replicas fetch parts from each other over the interserver port.
			interserver := freePort(tb)
			srv.writeConfig(Options{extra: fmt.Sprintf(`
  <interserver_http_port>%[6]d</interserver_http_port><interserver_http_host>127.0.0.1</interserver_http_host>
  <remote_servers><%[1]s>%[2]s</%[1]s></remote_servers>
  <zookeeper><node><host>127.0.0.1</host><port>%[3]d</port></node><session_timeout_ms>10000</session_timeout_ms></zookeeper>
  <macros><cluster>%[1]s</cluster><shard>%02[4]d</shard><replica>%[5]s</replica></macros>
  <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>`,
				o.Name, shards.String(), c.ZooKeeper.Port, s+1, ReplicaName(s, r), interserver)})
		}
	}
	// Start them all, then wait for each: their start-ups overlap.
	for _, srv := range c.All() {
		srv.launch()
	}
	for _, srv := range c.All() {
		srv.waitReady()
	}
	for _, srv := range c.All() {
		srv.waitDDLQueue()
	}
	return c
}

// ddlQueueProbe answers 1 once the server's ZooKeeper session is up and the
// distributed DDL queue (distributed_ddl's path) exists in ZooKeeper.
const ddlQueueProbe = "SELECT count() FROM system.zookeeper WHERE path = '/clickhouse/task_queue' AND name = 'ddl'"

// waitDDLQueue waits until the server can take an ON CLUSTER query.
// ClickHouse 18.16 answers /ping before its DDL worker has a ZooKeeper
// session, and an ON CLUSTER query in that window dereferences the missing
// session and crashes the server (SIGSEGV in zkutil::ZooKeeper::createImpl,
// seen by the client as EOF). The worker opens the session (shared with
// system.zookeeper) and then creates the queue's path, so a server that
// reads the path through its own session has a worker ready, or a few
// instructions from it.
func (s *Server) waitDDLQueue() {
	s.tb.Helper()
	deadline := time.Now().Add(startTimeout)
	client := &http.Client{Timeout: 5 * time.Second}
	probe := fmt.Sprintf("http://127.0.0.1:%d/?query=%s", s.HTTPPort, url.QueryEscape(ddlQueueProbe))
	var last string
	for time.Now().Before(deadline) {
		resp, err := client.Get(probe)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			last = strings.TrimSpace(string(body))
			if resp.StatusCode == http.StatusOK && last == "1" {
				return
			}
		} else {
			last = err.Error()
		}
		if exited, err := s.exited(); exited {
			s.tb.Fatalf("chserver: server exited before its DDL queue was ready: %v\n%s", err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.tb.Fatalf("chserver: server %d's distributed DDL queue not ready after %s (last answer %q)\n%s", s.TCPPort, startTimeout, last, s.logTail())
}

// ReplicaName is the {replica} macro of Servers[shard][replica].
func ReplicaName(shard, replica int) string { return fmt.Sprintf("s%dr%d", shard+1, replica+1) }

// All is every server, shard after shard.
func (c *Cluster) All() []*Server {
	var out []*Server
	for _, replicas := range c.Servers {
		out = append(out, replicas...)
	}
	return out
}

// stopAll stops every running server at the end of the test: SIGTERM to
// all, then SIGKILL to those still running after a few seconds (a server of
// a cluster can take a minute to shut down, retrying to reach the others,
// and the test is done with its data).
func (c *Cluster) stopAll() {
	deadline := time.Now().Add(5 * time.Second)
	for _, srv := range c.All() {
		if srv.cmd != nil {
			_ = srv.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, srv := range c.All() {
		if srv.cmd == nil {
			continue
		}
		select {
		case <-srv.done:
		case <-time.After(time.Until(deadline)):
			_ = srv.cmd.Process.Kill()
			<-srv.done
		}
		srv.cmd = nil
	}
}
