package loadbalancingexporter

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// waitingLogger is a logger through a waitingCore on an observer, with a
// clock the test moves.
func waitingLogger(t *testing.T) (*zap.Logger, *observer.ObservedLogs, *time.Time) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	clock := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	w := newWaitState("k8s service flowtel-gateway.flowtel", 30*time.Second)
	w.now = func() time.Time { return clock }
	logger := zap.New(core).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return &waitingCore{Core: c, state: w} }))
	return logger, logs, &clock
}

var errNoBackend = errors.New(`couldn't find the exporter for the endpoint ""`)

func retry(l *zap.Logger, err error) {
	l.Info(retryMessage, zap.Error(err), zap.String("interval", "5s"))
}

// While the resolver has returned nothing, the retries are not logged: a wait
// under 10 s says nothing, a longer one one info line, then a warning every
// 5 minutes; a retry for any other error, and any other line, is logged as
// before; a retry long after the last held one starts a new wait.
func TestRetriesWithoutBackendAreNotLogged(t *testing.T) {
	logger, logs, clock := waitingLogger(t)
	step := func(d time.Duration) { *clock = clock.Add(d) }

	retry(logger, errNoBackend) // at once, as at every start
	step(5 * time.Second)
	for range 10 { // ten queue consumers
		retry(logger, errNoBackend)
	}
	require.Zero(t, logs.Len(), "retries within the grace logged: %v", logs.All())

	step(6 * time.Second) // 11 s
	retry(logger, errNoBackend)
	require.Equal(t, 1, logs.Len())
	e := logs.TakeAll()[0]
	assert.Equal(t, zapcore.InfoLevel, e.Level)
	assert.Contains(t, e.Message, "No gateway endpoint yet")
	assert.Equal(t, "k8s service flowtel-gateway.flowtel", e.ContextMap()["resolver"])
	assert.EqualValues(t, 12, e.ContextMap()["retries_not_logged"])

	// Retries every 30 s for the next 5 minutes: one warning at 5 minutes.
	for range 10 {
		step(30 * time.Second)
		retry(logger, fmt.Errorf("wrapped: %w", errNoBackend))
	}
	require.Equal(t, 1, logs.Len(), "%v", logs.All())
	e = logs.TakeAll()[0]
	assert.Equal(t, zapcore.WarnLevel, e.Level)
	assert.Contains(t, e.Message, "Still no gateway endpoint")

	// Other errors and other lines go through.
	retry(logger, errors.New("rpc error: code = Unavailable desc = connection refused"))
	logger.Info("Everything is ready.")
	logger.Error("Exporting failed. Dropping data.", zap.Error(errNoBackend))
	require.Equal(t, 3, logs.Len(), "%v", logs.All())
	logs.TakeAll()

	// The ring was filled and emptied again much later: a new wait, with its
	// own grace and line.
	step(10 * time.Minute)
	retry(logger, errNoBackend)
	require.Zero(t, logs.Len())
	step(15 * time.Second)
	retry(logger, errNoBackend)
	require.Equal(t, 1, logs.Len())
	assert.Contains(t, logs.All()[0].Message, "No gateway endpoint yet")
	assert.EqualValues(t, 2, logs.All()[0].ContextMap()["retries_not_logged"])
}

// Fields added with With reach the lines written, and the held-back retries
// of loggers derived from one another are one wait.
func TestWaitingCoreWith(t *testing.T) {
	logger, logs, clock := waitingLogger(t)
	child := logger.With(zap.String("endpoint", "gw-0:4317"))
	retry(logger, errNoBackend)
	*clock = clock.Add(11 * time.Second)
	retry(child, errNoBackend)
	require.Equal(t, 1, logs.Len())
	assert.Equal(t, "gw-0:4317", logs.All()[0].ContextMap()["endpoint"])
	child.Info("started")
	assert.Equal(t, 2, logs.Len())
}
