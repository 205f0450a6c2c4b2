// Package ports hands out loopback TCP ports for the testbed's servers.
//
// A port taken from the kernel with Listen(":0") and closed again comes from
// the ephemeral range, the same range the kernel picks source ports from for
// outgoing connections. Between the moment a test reserves such a port and
// the moment a server binds it, any connection the bed makes (to etcd, the
// API server, ClickHouse) may take it as its source port, and the server
// then fails with "address already in use". Free therefore picks ports below
// the ephemeral range (net.ipv4.ip_local_port_range), which the kernel never
// assigns on its own; only another listener can hold them, and Free checks that.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
)

// lowest is the first port handed out: above the well-known and the
// commonly configured service ports.
const lowest = 20000

var (
	mu    sync.Mutex
	given = map[int]bool{} // ports this process handed out, never twice
)

// Free returns a TCP port on 127.0.0.1 that nothing listens on and that the
// kernel does not give to outgoing connections.
func Free() (int, error) {
	highest := ephemeralStart() - 1
	if highest <= lowest {
		return 0, fmt.Errorf("net.ipv4.ip_local_port_range starts at %d (got no room above %d); raise it", highest+1, lowest)
	}
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		p := lowest + rand.IntN(highest-lowest+1)
		if given[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue // someone listens there
		}
		_ = l.Close()
		given[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("ports: no free port in %d-%d after 1000 tries", lowest, highest)
}

// ephemeralStart reads the first port of the kernel's ephemeral range
// (32768 when it cannot be read: Linux's default).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &lo, &hi); err != nil || lo <= 0 {
		return 32768
	}
	return lo
}
