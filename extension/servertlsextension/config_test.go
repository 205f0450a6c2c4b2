package servertlsextension

import (
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/configtest"
)

// TestLoadConfig: every instance of testdata/config.yaml, loaded over the
// defaults as the collector loads it, is the whole struct expected, or fails
// validation with the errors expected.
func TestLoadConfig(t *testing.T) {
	f := NewFactory()
	files := func(c *Config) {
		c.TLS.CertFile, c.TLS.KeyFile = "/etc/flowtel/tls/tls.crt", "/etc/flowtel/tls/tls.key"
	}
	configtest.LoadConfig(t, f, []configtest.Case{
		{Name: "", Want: configtest.Defaults(f, files)},
		{Name: "mtls", Want: configtest.Defaults(f, func(c *Config) {
			files(c)
			c.TLS.ClientCAFile, c.TLS.ReloadClientCAFile = "/etc/flowtel/tls/ca.crt", true
			c.TLS.ReloadInterval, c.TLS.MinVersion = time.Minute, "1.3"
			c.LogInterval = time.Minute
		})},
		{Name: "no_client_ca", Want: configtest.Defaults(f, func(c *Config) {
			files(c)
			c.TLS.ReloadClientCAFile = true
		})},
		{Name: "no_certificate", WantErr: []string{
			`tls.cert_file: required (got ""); set the certificate the server presents (or tls.cert_pem)`,
			`tls.key_file: required (got ""); set the certificate's private key (or tls.key_pem)`,
		}},
		{Name: "no_key", WantErr: []string{`tls.key_file: required (got ""); set the certificate's private key (or tls.key_pem)`}},
		{Name: "bad_log_interval", Err: "log_interval: must be positive (got 0s); set a duration such as 10s"},
	})
}
