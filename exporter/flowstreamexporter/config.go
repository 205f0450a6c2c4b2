package flowstreamexporter

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/configgrpc"

	"github.com/flowtel/flowtel/internal/configcheck"
	"github.com/flowtel/flowtel/internal/k8sclient"
)

// DefaultAPIGroup is the API group of the virtual flows resource: Antrea's,
// so that existing RoleBindings and antrea-ui keep working.
const DefaultAPIGroup = "observability.antrea.io"

// Config is the flow_stream exporter's configuration.
type Config struct {
	// The gRPC server: endpoint (default :14740), tls (required: cert_file and
	// key_file), keepalive, max_concurrent_streams, ... tls.client_ca_file is
	// refused: client certificates are requested, not required, and verified
	// against the cluster's client CA bundle (see README).
	configgrpc.ServerConfig `mapstructure:",squash"`

	// BufferSize is how many records the ring buffer holds (history for new
	// streams, slack for slow ones).
	BufferSize int `mapstructure:"buffer_size"`

	// Kubernetes is how streams are authenticated and authorized.
	Kubernetes AuthConfig `mapstructure:"kubernetes"`

	// Limits bounds concurrent streams.
	Limits LimitsConfig `mapstructure:"limits"`

	// History serves streams whose since is older than the ring from
	// ClickHouse (history.go).
	History HistoryConfig `mapstructure:"history"`

	_ struct{}
}

// AuthConfig configures authentication and authorization against the
// Kubernetes API.
type AuthConfig struct {
	// Auth is how the exporter reaches the Kubernetes API.
	k8sclient.Auth `mapstructure:",squash"`
	// APIGroup is the API group of the virtual resources flows and
	// flows/identity named in Roles.
	APIGroup string `mapstructure:"api_group"`
	// DecisionTTL is how long an allow or deny decision is cached.
	DecisionTTL time.Duration `mapstructure:"decision_ttl"`
	// RecheckInterval is how often an established stream re-checks its scope.
	RecheckInterval time.Duration `mapstructure:"recheck_interval"`
	// MaxConcurrentTokenReviews bounds TokenReviews in flight.
	MaxConcurrentTokenReviews int `mapstructure:"max_concurrent_token_reviews"`

	_ struct{}
}

// LimitsConfig bounds concurrent streams (RESOURCE_EXHAUSTED beyond).
type LimitsConfig struct {
	// MaxStreams is the limit over all clients.
	MaxStreams int `mapstructure:"max_streams"`
	// MaxStreamsPerClient is the limit per authenticated user.
	MaxStreamsPerClient int `mapstructure:"max_streams_per_client"`

	_ struct{}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	errs = configcheck.Positive(errs, "buffer_size", c.BufferSize, fmt.Sprintf("the default is %d", defaultBufferSize))
	if !c.TLS.HasValue() {
		errs = append(errs, errors.New("tls: is required (got none); set tls.cert_file and tls.key_file to the server certificate"))
	} else {
		t := c.TLS.Get()
		if t.CertFile == "" && string(t.CertPem) == "" {
			errs = append(errs, errors.New("tls.cert_file: is required (got none); the stream is served over TLS only"))
		}
		if t.ClientCAFile != "" || t.ReloadClientCAFile {
			errs = append(errs, fmt.Errorf("tls.client_ca_file: is not used (got %q); client certificates are verified against the cluster's client CA bundle, remove the setting", t.ClientCAFile))
		}
	}
	if err := c.Kubernetes.Auth.Check("kubernetes."); err != nil {
		errs = append(errs, err)
	}
	if c.Kubernetes.APIGroup == "" {
		errs = append(errs, fmt.Errorf("kubernetes.api_group: must not be empty; the default is %s", DefaultAPIGroup))
	}
	errs = configcheck.Positive(errs, "kubernetes.decision_ttl", c.Kubernetes.DecisionTTL, "")
	errs = configcheck.Positive(errs, "kubernetes.recheck_interval", c.Kubernetes.RecheckInterval, "")
	errs = configcheck.Positive(errs, "kubernetes.max_concurrent_token_reviews", c.Kubernetes.MaxConcurrentTokenReviews, "")
	errs = configcheck.Positive(errs, "limits.max_streams", c.Limits.MaxStreams, "")
	if c.Limits.MaxStreamsPerClient <= 0 || c.Limits.MaxStreamsPerClient > c.Limits.MaxStreams {
		errs = append(errs, fmt.Errorf("limits.max_streams_per_client: must be between 1 and limits.max_streams (got %d, max_streams %d)", c.Limits.MaxStreamsPerClient, c.Limits.MaxStreams))
	}
	errs = append(errs, c.History.validate()...)
	return errors.Join(errs...)
}
