package antreaflowsreceiver

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"k8s.io/client-go/kubernetes"

	"github.com/flowtel/flowtel/internal/configcheck"
	"github.com/flowtel/flowtel/internal/flowrecord/recordform"
	"github.com/flowtel/flowtel/internal/k8sclient"
)

// Config is the antrea_flows receiver's configuration. The defaults are the
// ports Antrea's agents export to: IPFIX on 4739 (TCP and UDP), gRPC on 14739.
type Config struct {
	// IPFIX is the agents' IPFIX export (flowCollectorAddr "...:4739:tls",
	// ":tcp" or ":udp").
	IPFIX IPFIXConfig `mapstructure:"ipfix"`
	// GRPC is Antrea's FlowExportService (flowCollectorAddr "...:14739:grpc").
	GRPC GRPCConfig `mapstructure:"grpc"`
	// TLS, when set, secures the IPFIX TCP listener (agents' "tls" transport)
	// and the gRPC server with the gateway's certificate. With
	// tls.client_ca_file set, a client must present a certificate that CA
	// signed, as Antrea's Flow Aggregator requires; others are refused and
	// counted. UDP is never encrypted (Antrea's agents send it in clear).
	TLS configoptional.Optional[configtls.ServerConfig] `mapstructure:"tls"`
	// ClusterUID is the k8s.cluster.uid resource attribute of the records:
	// the agents do not send it. Empty: not set.
	ClusterUID string `mapstructure:"cluster_uid"`
	// Kubernetes, when set, watches the cluster's Nodes, so that a Node's
	// own addresses (its podCIDR gateway address, InternalIP, ExternalIP)
	// are Node endpoints of that Node (decision D1): a host's traffic to its
	// own Pods, which Antrea's agents label inter-Node or to-external
	// (Antrea issue #8260), is intra-Node and awaits no other half.
	Kubernetes configoptional.Optional[KubernetesConfig] `mapstructure:"kubernetes"`
	// Encoding is the form the records are handed on in (decision D13):
	// attributes (default, the public schema) or compact, flowtel's own
	// form, for a pipeline whose processors and consumers are flowtel's
	// (node_identity, flow_correlation), as in the shipped gateway where
	// the node collectors' records arrive compact: it saves encoding every
	// attribute here and decoding them again in flow_correlation.
	Encoding string `mapstructure:"encoding"`

	// kubeClient replaces the client Kubernetes would build (tests).
	kubeClient kubernetes.Interface

	_ struct{}
}

// KubernetesConfig is how the receiver reaches the API server.
type KubernetesConfig struct {
	// AuthType is serviceAccount (in-cluster) or kubeConfig.
	AuthType string `mapstructure:"auth_type"`
	// KubeConfig is the kubeconfig file of auth_type kubeConfig (empty:
	// $KUBECONFIG, then ~/.kube/config).
	KubeConfig string `mapstructure:"kubeconfig"`

	_ struct{}
}

// IPFIXConfig configures the IPFIX collector.
type IPFIXConfig struct {
	// Endpoint is the address both transports listen on; empty disables IPFIX.
	Endpoint string `mapstructure:"endpoint"`
	// Transports lists tcp (TLS when tls is set) and udp.
	Transports []string `mapstructure:"transports"`
	// TemplateTTL is how long a UDP exporter's template lives without being
	// sent again (TCP and TLS templates live as long as their connection).
	TemplateTTL time.Duration `mapstructure:"template_ttl"`
	// MaxUDPExporters bounds the UDP exporters whose templates are kept.
	// A new exporter beyond it takes the place of the one heard from least
	// recently if that one has been idle for UDPExporterIdle; otherwise its
	// message is refused and counted (exporter_limit).
	MaxUDPExporters int `mapstructure:"max_udp_exporters"`
	// UDPExporterIdle is how long a UDP exporter must have been silent
	// before a new one may take its place.
	UDPExporterIdle time.Duration `mapstructure:"udp_exporter_idle"`
	// UDPQueueSize bounds the UDP datagrams read and waiting for the
	// pipeline: one goroutine reads the socket, another decodes and hands
	// records on. A datagram read while the queue is full is shed and
	// counted (udp_datagrams_dropped, queue_full).
	UDPQueueSize int `mapstructure:"udp_queue_size"`
	// MaxTemplatesPerSession bounds the templates one session (a TCP or TLS
	// connection, a UDP exporter) keeps; MaxTemplates those of all sessions.
	// A template over either bound is refused and counted (template_limit).
	MaxTemplatesPerSession int `mapstructure:"max_templates_per_session"`
	MaxTemplates           int `mapstructure:"max_templates"`
	// InsecureUDP accepts udp in transports although tls is set: the opt-out
	// of the rule that no plaintext transport listens beside TLS. UDP is
	// neither encrypted nor authenticated, so its records never carry the
	// authenticated-agent mark (node_identity does not let them pass).
	InsecureUDP bool `mapstructure:"insecure_udp"`

	_ struct{}
}

// GRPCConfig configures the FlowExportService server.
type GRPCConfig struct {
	// Endpoint is the address the server listens on; empty disables gRPC.
	Endpoint string `mapstructure:"endpoint"`
	// MaxRecvMsgSize bounds one ExportRequest, in bytes.
	MaxRecvMsgSize int `mapstructure:"max_recv_msg_size"`

	_ struct{}
}

const (
	transportTCP = "tcp"
	transportUDP = "udp"
)

func createDefaultConfig() *Config {
	return &Config{
		IPFIX: IPFIXConfig{Endpoint: ":4739", Transports: []string{transportTCP, transportUDP},
			TemplateTTL: 30 * time.Minute, MaxUDPExporters: 10_000, UDPExporterIdle: time.Minute, UDPQueueSize: 1024,
			MaxTemplatesPerSession: 64, MaxTemplates: 20_000},
		GRPC:     GRPCConfig{Endpoint: ":14739", MaxRecvMsgSize: 4 << 20},
		Encoding: recordform.Attributes,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.IPFIX.Endpoint == "" && c.GRPC.Endpoint == "" {
		errs = append(errs, errors.New("ipfix.endpoint, grpc.endpoint: both empty (nothing to receive); set at least one, such as :4739 or :14739"))
	}
	if c.IPFIX.Endpoint != "" {
		if _, _, err := net.SplitHostPort(c.IPFIX.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("ipfix.endpoint: not host:port (got %q); use an address such as :4739", c.IPFIX.Endpoint))
		}
		if len(c.IPFIX.Transports) == 0 {
			errs = append(errs, errors.New("ipfix.transports: empty; list tcp and/or udp, or set ipfix.endpoint to \"\" to disable IPFIX"))
		}
		for _, t := range c.IPFIX.Transports {
			if t != transportTCP && t != transportUDP {
				errs = append(errs, fmt.Errorf("ipfix.transports: unknown transport (got %q); list tcp (TLS when tls is set) and/or udp", t))
			}
		}
		if len(slices.Compact(slices.Sorted(slices.Values(c.IPFIX.Transports)))) != len(c.IPFIX.Transports) {
			errs = append(errs, fmt.Errorf("ipfix.transports: listed twice (got %v); list each transport once", c.IPFIX.Transports))
		}
		if c.TLS.HasValue() && slices.Contains(c.IPFIX.Transports, transportUDP) && !c.IPFIX.InsecureUDP {
			errs = append(errs, errors.New("ipfix.transports: udp beside tls (UDP is neither encrypted nor authenticated: any host could send records in any Node's name); remove udp from ipfix.transports, or opt out with ipfix.insecure_udp: true (its records are then not marked as an authenticated agent's)"))
		}
		errs = configcheck.Positive(errs, "ipfix.template_ttl", c.IPFIX.TemplateTTL, "set a duration such as 30m")
		errs = configcheck.Positive(errs, "ipfix.max_templates_per_session", c.IPFIX.MaxTemplatesPerSession, "set a bound such as 64")
		errs = configcheck.Positive(errs, "ipfix.max_templates", c.IPFIX.MaxTemplates, "set a bound such as 20000")
		errs = configcheck.Positive(errs, "ipfix.udp_exporter_idle", c.IPFIX.UDPExporterIdle, "set a duration such as 1m")
		errs = configcheck.Positive(errs, "ipfix.udp_queue_size", c.IPFIX.UDPQueueSize, "set a bound such as 1024")
		errs = configcheck.Positive(errs, "ipfix.max_udp_exporters", c.IPFIX.MaxUDPExporters, "set a bound such as 10000")
	}
	if c.GRPC.Endpoint != "" {
		if _, _, err := net.SplitHostPort(c.GRPC.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("grpc.endpoint: not host:port (got %q); use an address such as :14739", c.GRPC.Endpoint))
		}
		errs = configcheck.Positive(errs, "grpc.max_recv_msg_size", c.GRPC.MaxRecvMsgSize, "set a size in bytes such as 4194304")
	}
	if err := recordform.Check(c.Encoding, "flowtel's node_identity and flow_correlation"); err != nil {
		errs = append(errs, err)
	}
	if c.Kubernetes.HasValue() {
		k := c.Kubernetes.Get()
		if err := k8sclient.CheckAuth("kubernetes.", k.AuthType, k.KubeConfig); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
