package antreaflowsreceiver

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowtel/flowtel/internal/logsreceiver"
	"github.com/flowtel/flowtel/receiver/antreaflowsreceiver/internal/metadata"
)

// TestLifecycle: the receiver starts on free ports, serves, shuts down
// (twice is fine) and frees its ports; a port already taken fails Start with
// an error naming it and leaves nothing listening.
func TestLifecycle(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.IPFIX.Endpoint, cfg.GRPC.Endpoint = freeAddr(t, "tcp"), freeAddr(t, "tcp")
	cfg.IPFIX.Transports = []string{transportTCP}
	f := NewFactory()
	rcv, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	conn, err := net.Dial("tcp", cfg.IPFIX.Endpoint)
	require.NoError(t, err)
	require.NoError(t, rcv.Shutdown(context.Background()))
	require.NoError(t, rcv.Shutdown(context.Background()))
	conn.Close()
	for _, addr := range []string{cfg.IPFIX.Endpoint, cfg.GRPC.Endpoint} {
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "%s is free again", addr)
		ln.Close()
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	cfg2 := createDefaultConfig()
	cfg2.IPFIX.Endpoint, cfg2.GRPC.Endpoint = freeAddr(t, "tcp"), taken.Addr().String()
	cfg2.IPFIX.Transports = []string{transportTCP}
	rcv2, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg2, consumertest.NewNop())
	require.NoError(t, err)
	err = rcv2.Start(context.Background(), componenttest.NewNopHost())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "grpc listener on "+taken.Addr().String())
	require.NoError(t, rcv2.Shutdown(context.Background()))
	ln, err := net.Listen("tcp", cfg2.IPFIX.Endpoint)
	require.NoError(t, err, "the IPFIX listener was closed when Start failed")
	ln.Close()

	_, err = f.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, nil)
	assert.ErrorIs(t, err, logsreceiver.ErrNilConsumer)
}
