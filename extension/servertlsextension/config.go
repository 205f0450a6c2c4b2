package servertlsextension

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/configtls"

	"github.com/flowtel/flowtel/internal/configcheck"
)

// Config is the TLS a gRPC server serves when it lists the extension in its
// middlewares, and how refused handshakes are logged.
type Config struct {
	// TLS is the server's TLS: the certificate it presents (cert_file,
	// key_file, reloaded every reload_interval), the CA a client certificate
	// must chain to (client_ca_file: without it no client certificate is
	// asked for; client_ca_file_reload re-reads it when it changes), versions
	// and ciphers. The same keys as a receiver's tls block.
	TLS configtls.ServerConfig `mapstructure:"tls"`

	// LogInterval is the least time between two log lines about refused
	// handshakes: the first refusal is logged at once, the ones within the
	// interval after it are counted only, and the next line says how many were
	// not logged. The metric counts every handshake.
	LogInterval time.Duration `mapstructure:"log_interval"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks what the handshake needs. configtls validates the rest
// (versions, and it repeats that a server needs a certificate and a key).
func (c *Config) Validate() error {
	var errs []error
	hasCert := c.TLS.CertFile != "" || string(c.TLS.CertPem) != ""
	hasKey := c.TLS.KeyFile != "" || string(c.TLS.KeyPem) != ""
	if !hasCert {
		errs = append(errs, errors.New(`tls.cert_file: required (got ""); set the certificate the server presents (or tls.cert_pem)`))
	}
	if !hasKey {
		errs = append(errs, errors.New(`tls.key_file: required (got ""); set the certificate's private key (or tls.key_pem)`))
	}
	errs = configcheck.Positive(errs, "log_interval", c.LogInterval, fmt.Sprintf("set a duration such as %s", defaultLogInterval))
	return errors.Join(errs...)
}
