package conntrackreceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/deny"
)

// TestDeniedLingerFromSysctls: a denied connection lingers as long as the
// namespace's conntrack keeps an unanswered entry of its protocol; a timeout
// that cannot be read (or is 0) is the kernel's default.
func TestDeniedLingerFromSysctls(t *testing.T) {
	ns, err := ctsource.OpenNamespace("")
	require.NoError(t, err)
	defer ns.Close()
	dir := t.TempDir()
	require.Equal(t, deny.DefaultLinger, deniedLinger(ns, dir), "nothing readable")

	require.NoError(t, os.Mkdir(filepath.Join(dir, "netfilter"), 0o755))
	for name, v := range map[string]string{
		"nf_conntrack_tcp_timeout_syn_sent": "60\n", "nf_conntrack_udp_timeout": "10\n",
		"nf_conntrack_icmp_timeout": "0\n", "nf_conntrack_generic_timeout": "x\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "netfilter", name), []byte(v), 0o644))
	}
	want := deny.DefaultLinger
	want.TCP, want.UDP = time.Minute, 10*time.Second
	require.Equal(t, want, deniedLinger(ns, dir))
}
