package flowcorrelationprocessor

import (
	"errors"
	"fmt"
	"time"
)

// Modes of the processor.
const (
	// ModeAggregate pairs the halves of each connection and aggregates
	// per-Node statistics (Antrea's Flow Aggregator "Aggregate" mode).
	ModeAggregate = "aggregate"
	// ModeProxy keeps no state: each record passes through with its flow
	// direction (Antrea's "Proxy" mode).
	ModeProxy = "proxy"
)

// pairingTimeoutFactor derives the default pairing timeout from the active
// timeout. Antrea's Flow Aggregator re-checks a half without a peer at each
// active expiry and gives up after MaxRetries (2) retries, so a half waits
// about 3 × the active timeout before it is deleted; we wait as long, then
// export it marked unpaired instead of deleting it.
const pairingTimeoutFactor = 3

// Config is the flow_correlation processor's configuration.
type Config struct {
	// Mode is "aggregate" (default) or "proxy".
	Mode string `mapstructure:"mode"`
	// ActiveTimeout: a connection is re-exported this long after its previous
	// export, if new data arrived since (aggregate mode).
	ActiveTimeout time.Duration `mapstructure:"active_timeout"`
	// InactiveTimeout: a connection is forgotten this long after its last
	// record (aggregate mode).
	InactiveTimeout time.Duration `mapstructure:"inactive_timeout"`
	// PairingTimeout: a half that finds no peer within it is exported marked
	// unpaired (aggregate mode). 0 means 3 × ActiveTimeout.
	PairingTimeout time.Duration `mapstructure:"pairing_timeout"`
	// MaxRecords bounds the connections held (aggregate mode). Over it the
	// ones with the nearest deadlines are exported early, marked evicted.
	MaxRecords int `mapstructure:"max_records"`

	_ struct{}
}

// Validate checks the configuration; it names every field that is wrong.
func (c *Config) Validate() error {
	var errs []error
	if c.Mode != ModeAggregate && c.Mode != ModeProxy {
		errs = append(errs, fmt.Errorf("mode: %q is not one of %q, %q", c.Mode, ModeAggregate, ModeProxy))
	}
	if c.ActiveTimeout <= 0 {
		errs = append(errs, fmt.Errorf("active_timeout: must be positive, got %v", c.ActiveTimeout))
	}
	if c.InactiveTimeout <= 0 {
		errs = append(errs, fmt.Errorf("inactive_timeout: must be positive, got %v", c.InactiveTimeout))
	}
	if c.PairingTimeout < 0 {
		errs = append(errs, fmt.Errorf("pairing_timeout: must not be negative (0 means %d × active_timeout), got %v",
			pairingTimeoutFactor, c.PairingTimeout))
	}
	if c.MaxRecords <= 0 {
		errs = append(errs, fmt.Errorf("max_records: must be at least 1, got %d", c.MaxRecords))
	}
	return errors.Join(errs...)
}

// pairingTimeout is the configured pairing timeout or its default.
func (c *Config) pairingTimeout() time.Duration {
	if c.PairingTimeout > 0 {
		return c.PairingTimeout
	}
	return pairingTimeoutFactor * c.ActiveTimeout
}
