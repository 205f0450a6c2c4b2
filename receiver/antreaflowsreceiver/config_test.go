package antreaflowsreceiver

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"

	"github.com/flowtel/flowtel/internal/configtest"
)

func TestLoadConfig(t *testing.T) {
	defaults := func(mut func(*Config)) *Config {
		c := createDefaultConfig()
		mut(c)
		return c
	}
	configtest.LoadConfig(t, NewFactory(), []configtest.Case{
		{Name: "", Want: defaults(func(*Config) {})},
		{Name: "tls", Want: defaults(func(c *Config) {
			c.TLS = configoptional.Some(configtls.ServerConfig{
				Config:       configtls.Config{CertFile: "/etc/flowtel/tls/tls.crt", KeyFile: "/etc/flowtel/tls/tls.key"},
				ClientCAFile: "/etc/flowtel/tls/ca.crt",
			})
			c.ClusterUID = "6b1c6c3e-0d4c-4a54-9f3a-3b7f0e3b5c11"
			c.IPFIX.Transports = []string{"tcp"}
		})},
		{Name: "tls_insecure_udp", Want: defaults(func(c *Config) {
			c.TLS = configoptional.Some(configtls.ServerConfig{
				Config:       configtls.Config{CertFile: "/etc/flowtel/tls/tls.crt", KeyFile: "/etc/flowtel/tls/tls.key"},
				ClientCAFile: "/etc/flowtel/tls/ca.crt",
			})
			c.IPFIX.InsecureUDP = true
		})},
		{Name: "bad_udp_beside_tls", Err: "ipfix.transports: udp beside tls (UDP is neither encrypted nor authenticated: any host could send records in any Node's name); remove udp from ipfix.transports, or opt out with ipfix.insecure_udp: true (its records are then not marked as an authenticated agent's)"},
		{Name: "grpc_only", Want: defaults(func(c *Config) { c.IPFIX.Endpoint = "" })},
		{Name: "udp_only", Want: defaults(func(c *Config) {
			c.IPFIX.Transports, c.IPFIX.TemplateTTL, c.IPFIX.MaxUDPExporters = []string{"udp"}, 10*time.Minute, 100
			c.GRPC.Endpoint = ""
		})},
		{Name: "bad_nothing", Err: "ipfix.endpoint, grpc.endpoint: both empty (nothing to receive); set at least one, such as :4739 or :14739"},
		{Name: "bad_transport", Err: `ipfix.transports: unknown transport (got "sctp"); list tcp (TLS when tls is set) and/or udp` + "\n" +
			"ipfix.transports: listed twice (got [tcp sctp tcp]); list each transport once"},
		{Name: "bad_endpoints", Err: `ipfix.endpoint: not host:port (got "4739"); use an address such as :4739` + "\n" +
			"ipfix.template_ttl: must be positive (got 0s); set a duration such as 30m\n" +
			"ipfix.max_udp_exporters: must be positive (got 0); set a bound such as 10000\n" +
			`grpc.endpoint: not host:port (got "localhost"); use an address such as :14739` + "\n" +
			"grpc.max_recv_msg_size: must be positive (got 0); set a size in bytes such as 4194304"},
		{Name: "compact", Want: defaults(func(c *Config) { c.Encoding = "compact" })},
		{Name: "bad_encoding", Err: `encoding: unknown (got "protobuf"); set attributes (the public schema, default) or compact (only when the records go to flowtel's node_identity and flow_correlation alone)`},
		// configtls checks its own block.
		{Name: "bad_tls", Err: "tls: TLS configuration must include both certificate and key for server connections"},
	})
}
