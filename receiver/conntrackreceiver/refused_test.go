//go:build integration

package conntrackreceiver

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestRefusedConnectionWithDefaultConfig: a SYN answered by RST is destroyed
// by the kernel at once, so no dump ever lists it. With the receiver's default
// configuration (only the namespace and Node name set) it must still be
// reported, once: its SYN and RST (1+1 packets), its TCP state and an end of
// flow.
func TestRefusedConnectionWithDefaultConfig(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := newLab(t)
			l.kubeProxy() // a Node's netfilter rules: conntrack runs in its namespace
			cfg := createDefaultConfig()
			cfg.NetNS = l.path(l.node)
			cfg.NodeName = "node-a"
			h := startReceiver(t, cfg)

			l.do(l.cli, func() error {
				c, err := net.DialTimeout("tcp", hostPort(f.srv, "9"), 5*time.Second) // nothing listens on port 9
				if err == nil {
					c.Close()
					return errors.New("connected to a closed port")
				}
				if !errors.Is(err, syscall.ECONNREFUSED) {
					return err
				}
				return nil
			})
			match := func(r *flowrecord.Record) bool {
				return r.Destination.Address.String() == f.srv && r.Destination.Port == 9 && r.Protocol == 6
			}
			h.waitFor("the refused connection", match, func(rs []flowrecord.Record) bool { return len(rs) > 0 })
			time.Sleep(2 * cfg.PollInterval) // nothing may follow
			rs := h.waitFor("the refused connection", match, func([]flowrecord.Record) bool { return true })
			r := rs[0]
			if len(rs) != 1 || r.EndReason != flowrecord.EndReasonEndOfFlow || r.TCPState != "CLOSE" ||
				r.Stats.PacketTotal != 1 || r.ReverseStats.PacketTotal != 1 || r.Stats.PacketDelta != 1 || r.ReverseStats.PacketDelta != 1 ||
				r.Source.Address.String() != f.cli || r.Start.IsZero() {
				t.Fatalf("want exactly one end-of-flow record in CLOSE with 1+1 packets from %s:\n%s", f.cli, describe(rs))
			}
		})
	}
}
