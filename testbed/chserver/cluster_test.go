//go:build integration

package chserver

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// The cluster's servers see each other and ZooKeeper: a replicated table
// created ON CLUSTER exists on all four, and a row inserted on one replica
// reaches the other replica of its shard.
func TestCluster(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Name: "probe", Shards: 2, Replicas: 2})
	ctx := context.Background()
	open := func(s *Server) clickhouse.Conn {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}, ReadTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	first := open(c.Servers[0][0])
	for _, q := range []string{
		"CREATE TABLE t ON CLUSTER probe (x UInt64) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/t', '{replica}') ORDER BY x",
		"INSERT INTO t (x) SELECT 7",
	} {
		// ON CLUSTER answers with a row per host: Query, not Exec, reads them.
		rows, err := first.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rows.Close()
	}
	for s, replicas := range c.Servers {
		for r, srv := range replicas {
			conn := open(srv)
			var n uint64
			want := uint64(0)
			if s == 0 {
				want = 1
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				if err := conn.QueryRow(ctx, "SELECT count() FROM t").Scan(&n); err != nil {
					t.Fatalf("%s: %v", ReplicaName(s, r), err)
				}
				if n == want || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if n != want {
				t.Errorf("%s: %d rows, want %d", ReplicaName(s, r), n, want)
			}
		}
	}
}
