package k8scertificatesextension

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/extension/k8scertificatesextension/internal/metadata"
	"github.com/flowtel/flowtel/internal/tick"
)

// certificates checks the Secrets at start and every check_interval.
type certificates struct {
	cfg    Config
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// startTimeout bounds the first check, which Start waits for: the gateway's
// own Secret volumes fill once the Secrets exist.
const startTimeout = 30 * time.Second

func (c *certificates) Start(ctx context.Context, _ component.Host) error {
	ns, err := c.cfg.namespace()
	if err != nil {
		return err
	}
	c.cfg.Namespace = ns
	client, err := c.cfg.Client("flowtel-k8s-certificates")
	if err != nil {
		return err
	}
	p := &provisioner{client: client, cfg: &c.cfg, logger: c.logger, now: time.Now}
	first, cancel := context.WithTimeout(ctx, startTimeout)
	c.check(first, p)
	cancel()
	c.waitForFiles(ctx)

	loop, stop := context.WithCancel(context.Background())
	c.cancel = stop
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		tick.Every(loop, c.cfg.CheckInterval, func(time.Time) { c.check(loop, p) })
	}()
	return nil
}

// The outcomes of extension_k8s_certificates_checks, as metadata.yaml lists them.
const (
	checkOK         = "ok"
	checkNotOurs    = "not_ours"
	checkFailed     = "failed"
	checkCAExpiring = "ca_expiring"
)

// check runs one pass, logs and counts its outcome; failures are retried at
// the next check (the API server may be briefly unreachable; the collector
// keeps running).
func (c *certificates) check(ctx context.Context, p *provisioner) {
	written, err := p.ensure(ctx)
	// Counted with a context of their own: ctx may be the first check's,
	// expired by now.
	bg := context.Background()
	for _, name := range written {
		c.tel.ExtensionK8sCertificatesSecretsWritten.Add(bg, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("secret", name))))
	}
	if len(written) > 0 {
		c.logger.Info("certificate Secrets written", zap.Strings("secrets", written), zap.String("namespace", c.cfg.Namespace))
	}
	outcome := checkOK
	switch {
	case errors.Is(err, errCAExpiring):
		outcome = checkCAExpiring
		c.logger.Error("a CA is expired or about to expire and could not be renewed: TLS between the collectors fails once it expires", zap.Error(err), zap.Duration("ca_renew_before", c.cfg.CARenewBefore))
	case errors.Is(err, errNotOurs):
		outcome = checkNotOurs
		c.logger.Info("certificate Secrets exist that the extension did not make: leaving them alone", zap.Error(err))
	case err != nil:
		outcome = checkFailed
		c.logger.Error("certificate Secrets not checked; trying again at the next check", zap.Error(err), zap.Duration("check_interval", c.cfg.CheckInterval))
	}
	c.tel.ExtensionK8sCertificatesChecks.Add(bg, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", outcome))))
}

func (c *certificates) Shutdown(context.Context) error {
	if c.cancel != nil {
		c.cancel()
	}
	c.done.Wait()
	c.tel.Shutdown()
	return nil
}

// waitForFiles returns once every wait_for_files file has content, or after
// wait_timeout (logged: the receivers then report the missing file).
func (c *certificates) waitForFiles(ctx context.Context) {
	if len(c.cfg.WaitForFiles) == 0 {
		return
	}
	deadline := time.Now().Add(c.cfg.WaitTimeout)
	for {
		missing := ""
		for _, f := range c.cfg.WaitForFiles {
			if st, err := os.Stat(f); err != nil || st.Size() == 0 {
				missing = f
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.logger.Warn("certificate file still missing; starting anyway", zap.String("file", missing), zap.Duration("wait_timeout", c.cfg.WaitTimeout))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
