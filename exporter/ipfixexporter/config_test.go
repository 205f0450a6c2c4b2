package ipfixexporter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/flowtel/flowtel/internal/configtest"
)

// TestLoadConfig: every instance of testdata/config.yaml, loaded over the
// defaults as the collector loads it, is the whole struct expected, or fails
// validation with the errors expected.
func TestLoadConfig(t *testing.T) {
	f := NewFactory()
	domain := uint32(42)
	configtest.LoadConfig(t, f, []configtest.Case{
		{Name: "", Want: configtest.Defaults(f, func(c *Config) { c.Endpoint = "collector.example:4739" })},
		{Name: "udp_agent", Want: configtest.Defaults(f, func(c *Config) {
			c.Endpoint, c.Transport, c.RecordLayout = "10.0.0.9:4739", TransportUDP, "agent"
			c.TemplateRefreshInterval = time.Minute
		})},
		{Name: "tls_proxy", Want: configtest.Defaults(f, func(c *Config) {
			c.Endpoint, c.Transport, c.RecordLayout = "[fd00::9]:4739", TransportTLS, "proxy"
			c.IncludeK8sUIDs, c.ObservationDomainID, c.ClusterID = true, &domain, "prod-eu"
			c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile = "/etc/ipfix/ca.crt", "/etc/ipfix/tls.crt", "/etc/ipfix/tls.key"
			c.TLS.MinVersion = "1.3"
		})},
		// The batcher is off by default (factory.go says why); a batch block
		// turns it on, over its defaults.
		{Name: "batched", Want: configtest.Defaults(f, func(c *Config) {
			c.Endpoint = "collector.example:4739"
			c.QueueConfig.Get().Batch = configoptional.Some(exporterhelper.BatchConfig{
				FlushTimeout: 200 * time.Millisecond, Sizer: exporterhelper.RequestSizerTypeItems, MinSize: 1000,
			})
		})},
		{Name: "json", Want: configtest.Defaults(f, func(c *Config) {
			c.Endpoint, c.Format, c.ClusterUUID = "127.0.0.1:5140", FormatJSON, "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9"
		})},
		{Name: "no_endpoint", WantErr: []string{`endpoint: required (got ""); set the IPFIX collector's host:port, such as collector:4739`}},
		{Name: "bad_endpoint", WantErr: []string{`endpoint: not host:port (got "collector": address collector: missing port in address); set the IPFIX collector's host:port`}},
		{Name: "bad_port", WantErr: []string{`endpoint: port is not a number in 1-65535 (got "0" in "a:0"); set the collector's port, such as 4739`}},
		{Name: "bad_transport", WantErr: []string{`transport: unknown (got "sctp"); use tcp, udp or tls`}},
		{Name: "bad_format", WantErr: []string{`format: unknown (got "xml"); use ipfix or json`}},
		{Name: "bad_layout", WantErr: []string{`record_layout: unknown (got "flows"); use aggregate, proxy or agent`}},
		{Name: "agent_uids", WantErr: []string{"include_k8s_names, include_k8s_uids: the agent layout's 43 IEs are fixed (got true, true); leave them at true and false, or use record_layout aggregate or proxy"}},
		{Name: "udp_too_small", WantErr: []string{"max_message_size: too small for the aggregate layout's 536-byte template message (got 512); set at least 536"}},
		{Name: "tls_on_tcp", WantErr: []string{"tls: only used with transport tls (got transport tcp); set transport: tls, or remove the tls settings"}},
		{Name: "bad_uuid", WantErr: []string{`cluster_uuid: not a UUID (got "not-a-uuid"); use the 8-4-4-4-12 hex form, or leave it unset to use each record's k8s.cluster.uid`}},
		{Name: "huge_message", WantErr: []string{"max_message_size: not in 512-65535 (got 70000); set a size in that range, or 0 for the transport's default"}},
		{Name: "bad_refresh", WantErr: []string{"template_refresh_interval: must be positive (got 0s); set a duration such as 10m0s"}},
	})
}

// The message size limit follows the transport and the layout when unset.
func TestMessageSizeDefaults(t *testing.T) {
	for _, tc := range []struct {
		transport, layout string
		set, want         int
	}{
		{TransportTCP, "aggregate", 0, 65535},
		{TransportTLS, "agent", 0, 65535},
		{TransportUDP, "agent", 0, 512},
		{TransportUDP, "proxy", 0, 1472},
		{TransportUDP, "aggregate", 9000, 9000},
	} {
		c := &Config{Transport: tc.transport, RecordLayout: tc.layout, MaxMessageSize: tc.set}
		assert.Equal(t, tc.want, c.messageSize(), "%s %s max_message_size %d", tc.transport, tc.layout, tc.set)
	}
}

func TestObservationDomainIsFNV1OfClusterUUIDBytes(t *testing.T) {
	// FNV-1 (not 1a) 32-bit over the 16 raw bytes, computed by hand here.
	u, _ := parseClusterUUID(testClusterUUID)
	h := uint32(2166136261)
	for _, b := range u {
		h *= 16777619
		h ^= uint32(b)
	}
	if got := observationDomain(testClusterUUID); got != h {
		t.Fatalf("observation domain %d, want %d", got, h)
	}
	if observationDomain("") != 0 {
		t.Fatal("no cluster UUID must give domain 0")
	}
}
