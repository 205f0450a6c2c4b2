package ipfixexporter

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/config/configtls"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/internal/configcheck"
	"github.com/flowtel/flowtel/internal/recordexport"
)

// Transports.
const (
	TransportTCP = "tcp"
	TransportUDP = "udp"
	TransportTLS = "tls"
)

// Formats.
const (
	FormatIPFIX = "ipfix"
	FormatJSON  = "json"
)

// Message size limits (bytes). Antrea's agent sends at most 512-byte UDP
// messages (no path MTU known); its Flow Aggregator uses the Pod's MTU − 28,
// 1472 on a 1500-byte Ethernet, because its templates do not fit in 512.
const (
	maxMessageSize       = 65535
	minMessageSize       = 512
	udpDefaultAgent      = 512
	udpDefaultAggregator = 1472
)

// Config is the ipfix exporter's configuration.
type Config struct {
	recordexport.Sending `mapstructure:",squash"`

	// Endpoint is the collector's host:port.
	Endpoint string `mapstructure:"endpoint"`
	// Transport is tcp (default), udp or tls (TCP with TLS; settings under tls).
	Transport string `mapstructure:"transport"`
	// TLS holds the CA, the optional client certificate (mTLS) and the minimum
	// version, used when Transport is tls.
	TLS configtls.ClientConfig `mapstructure:"tls"`
	// Format is ipfix (default) or json (newline-delimited JSON objects as
	// Antrea's JSON record format).
	Format string `mapstructure:"format"`

	// RecordLayout is aggregate (default), proxy or agent.
	RecordLayout string `mapstructure:"record_layout"`
	// IncludeK8sNames and IncludeK8sUIDs are Antrea's includeK8sNames (default
	// true) and includeK8sUIDs (default false); aggregate and proxy layouts only.
	IncludeK8sNames bool `mapstructure:"include_k8s_names"`
	IncludeK8sUIDs  bool `mapstructure:"include_k8s_uids"`

	// MaxMessageSize bounds every IPFIX message (bytes). 0: 65535 over TCP and
	// TLS; over UDP 512 for the agent layout, 1472 for the others.
	MaxMessageSize int `mapstructure:"max_message_size"`
	// TemplateRefreshInterval is how often templates are resent over UDP.
	TemplateRefreshInterval time.Duration `mapstructure:"template_refresh_interval"`

	// ObservationDomainID is the message headers' observation domain. Unset: the
	// FNV-1 32-bit hash of the cluster UUID's 16 bytes, as Antrea.
	ObservationDomainID *uint32 `mapstructure:"observation_domain_id"`
	// ClusterUUID is the cluster's UUID; unset: each record's resource attribute
	// k8s.cluster.uid.
	ClusterUUID string `mapstructure:"cluster_uuid"`
	// ClusterID is written to the clusterId IE; unset: the cluster UUID.
	ClusterID string `mapstructure:"cluster_id"`
}

func (c *Config) layoutOptions() layout.Options {
	return layout.Options{Kind: layout.Kind(c.RecordLayout), IncludeK8sNames: c.IncludeK8sNames, IncludeK8sUIDs: c.IncludeK8sUIDs}
}

// messageSize is the effective message size limit.
func (c *Config) messageSize() int {
	switch {
	case c.MaxMessageSize != 0:
		return c.MaxMessageSize
	case c.Transport != TransportUDP:
		return maxMessageSize
	case c.RecordLayout == string(layout.Agent):
		return udpDefaultAgent
	}
	return udpDefaultAggregator
}

// Validate checks the configuration; the collector calls it after unmarshalling.
func (c *Config) Validate() error {
	var errs []error
	if c.Endpoint == "" {
		errs = append(errs, errors.New(`endpoint: required (got ""); set the IPFIX collector's host:port, such as collector:4739`))
	} else if _, port, err := net.SplitHostPort(c.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("endpoint: not host:port (got %q: %v); set the IPFIX collector's host:port, such as collector:4739", c.Endpoint, err))
	} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		errs = append(errs, fmt.Errorf("endpoint: port is not a number in 1-65535 (got %q in %q); set the collector's port, such as 4739", port, c.Endpoint))
	}
	switch c.Transport {
	case TransportTCP, TransportUDP:
		if c.TLS.CAFile != "" || c.TLS.CertFile != "" || c.TLS.KeyFile != "" || c.TLS.CAPem != "" || c.TLS.CertPem != "" {
			errs = append(errs, fmt.Errorf("tls: only used with transport tls (got transport %s); set transport: tls, or remove the tls settings", c.Transport))
		}
	case TransportTLS:
		if err := c.TLS.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("tls: %w", err))
		}
	default:
		errs = append(errs, fmt.Errorf("transport: unknown (got %q); use tcp, udp or tls", c.Transport))
	}
	switch c.Format {
	case FormatIPFIX, FormatJSON:
	default:
		errs = append(errs, fmt.Errorf("format: unknown (got %q); use ipfix or json", c.Format))
	}
	switch layout.Kind(c.RecordLayout) {
	case layout.Aggregate, layout.Proxy:
	case layout.Agent:
		if !c.IncludeK8sNames || c.IncludeK8sUIDs {
			errs = append(errs, fmt.Errorf("include_k8s_names, include_k8s_uids: the agent layout's 43 IEs are fixed (got %t, %t); leave them at true and false, or use record_layout aggregate or proxy",
				c.IncludeK8sNames, c.IncludeK8sUIDs))
		}
	default:
		errs = append(errs, fmt.Errorf("record_layout: unknown (got %q); use aggregate, proxy or agent", c.RecordLayout))
	}
	if c.MaxMessageSize != 0 && (c.MaxMessageSize < minMessageSize || c.MaxMessageSize > maxMessageSize) {
		errs = append(errs, fmt.Errorf("max_message_size: not in %d-%d (got %d); set a size in that range, or 0 for the transport's default",
			minMessageSize, maxMessageSize, c.MaxMessageSize))
	}
	errs = configcheck.Positive(errs, "template_refresh_interval", c.TemplateRefreshInterval, fmt.Sprintf("set a duration such as %s", defaultTemplateTTL))
	if c.ClusterUUID != "" {
		if _, err := parseClusterUUID(c.ClusterUUID); err != nil {
			errs = append(errs, fmt.Errorf("cluster_uuid: %w (got %q); use the 8-4-4-4-12 hex form, or leave it unset to use each record's k8s.cluster.uid",
				err, c.ClusterUUID))
		}
	}
	if len(errs) == 0 && c.Format == FormatIPFIX {
		// Every template must fit in one message, or no collector can decode anything.
		v4, v6, err := layout.New(c.layoutOptions())
		if err != nil {
			errs = append(errs, fmt.Errorf("record_layout: %w", err))
		} else if need := templateMessageLen(v4, v6); need > c.messageSize() {
			errs = append(errs, fmt.Errorf("max_message_size: too small for the %s layout's %d-byte template message (got %d); set at least %d",
				c.RecordLayout, need, c.messageSize(), need))
		}
	}
	return errors.Join(errs...)
}
