package flowcorrelationprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, metadata.LogsStability, f.LogsStability())
	cfg := f.CreateDefaultConfig()
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, cfg.(*Config).Validate())

	for _, mode := range []string{ModeAggregate, ModeProxy} {
		t.Run(mode, func(t *testing.T) {
			c := f.CreateDefaultConfig().(*Config)
			c.Mode = mode
			p, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), c, consumertest.NewNop())
			require.NoError(t, err)
			assert.Equal(t, mode == ModeProxy, p.Capabilities().MutatesData)
			require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
			require.NoError(t, p.Shutdown(context.Background()))
			require.NoError(t, p.Shutdown(context.Background()), "a second shutdown is harmless")
		})
	}
}

func TestShutdownWithoutStart(t *testing.T) {
	f := NewFactory()
	p, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, p.Shutdown(context.Background()))
}
