package flowcorrelationprocessor

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/flowtel/flowtel/internal/configcheck"
	"github.com/flowtel/flowtel/internal/k8sindex"
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
	// Kubernetes, when present, gives the gateway its own Kubernetes index:
	// what a record lacks (an unpaired half's peer, the sides of a proxied
	// record, the cluster UID) is resolved from it. Absent: no index, no API
	// access, no cost.
	Kubernetes configoptional.Optional[KubernetesConfig] `mapstructure:"kubernetes"`

	_ struct{}
}

// KubernetesConfig configures the gateway's Kubernetes index (every Pod,
// Nodes, Services, EndpointSlices, ReplicaSets, Jobs; the kube-system
// Namespace's UID).
type KubernetesConfig struct {
	// auth_type, kubeconfig, wait_for_sync, wait_for_sync_timeout and
	// deleted_pod_retention, as k8s_flow's.
	k8sindex.Settings `mapstructure:",squash"`
	// PodLabels adds the labels of the Pods the gateway names.
	PodLabels bool `mapstructure:"pod_labels"`

	_ struct{}
}

func defaultKubernetesConfig() KubernetesConfig {
	return KubernetesConfig{Settings: k8sindex.DefaultSettings()}
}

// Validate checks the kubernetes settings; it names every field that is wrong.
func (k *KubernetesConfig) Validate() error {
	return errors.Join(k.Check(nil)...)
}

// Validate checks the configuration; it names every field that is wrong.
func (c *Config) Validate() error {
	var errs []error
	if c.Mode != ModeAggregate && c.Mode != ModeProxy {
		errs = append(errs, fmt.Errorf("mode: unknown (got %q); use %s or %s", c.Mode, ModeAggregate, ModeProxy))
	}
	errs = configcheck.Positive(errs, "active_timeout", c.ActiveTimeout, fmt.Sprintf("set a duration such as %v", defaultActiveTimeout))
	errs = configcheck.Positive(errs, "inactive_timeout", c.InactiveTimeout, fmt.Sprintf("set a duration such as %v", defaultInactiveTimeout))
	if c.PairingTimeout < 0 {
		errs = append(errs, fmt.Errorf("pairing_timeout: must not be negative (got %v); set 0 for %d × active_timeout, or a positive duration",
			c.PairingTimeout, pairingTimeoutFactor))
	}
	if c.MaxRecords <= 0 {
		errs = append(errs, fmt.Errorf("max_records: must be at least 1 (got %d); set the number of connections to hold, such as %d",
			c.MaxRecords, defaultMaxRecords))
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
