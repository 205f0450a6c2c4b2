package clickhouseflowsexporter

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configtls"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
	"github.com/flowtel/flowtel/internal/configcheck"
	"github.com/flowtel/flowtel/internal/recordexport"
)

// Environment variables read when username or password are not configured.
// They are the names Antrea's Flow Aggregator uses, so an existing
// clickhouse-secret can be mounted unchanged.
const (
	envUsername = "CH_USERNAME"
	envPassword = "CH_PASSWORD"
)

// Config is the clickhouse_flows exporter configuration.
type Config struct {
	recordexport.Sending `mapstructure:",squash"`

	// Endpoint is the server's native-protocol address: tcp://host:9000 or
	// tls://host:9440. HTTP is not supported (see README).
	Endpoint string `mapstructure:"endpoint"`
	// Username and Password default to $CH_USERNAME / $CH_PASSWORD, then to
	// the user "default" with an empty password.
	Username string              `mapstructure:"username"`
	Password configopaque.String `mapstructure:"password"`
	// Database and Table name the flows table (default `default`.`flows`).
	Database string `mapstructure:"database"`
	Table    string `mapstructure:"table"`
	// CreateSchema creates the database and the table when they are missing.
	CreateSchema bool `mapstructure:"create_schema"`
	// TheiaViews, with CreateSchema, also creates Theia's views over the
	// table (flows_pod_view, flows_node_view, flows_policy_view and their
	// tables), which Theia's dashboards read. They cost the server CPU on
	// every insert: turn them off when nothing reads them.
	TheiaViews bool `mapstructure:"theia_views"`
	// Cluster, when set, names the ClickHouse cluster (remote_servers) the
	// table is spread over: with CreateSchema the exporter creates, ON
	// CLUSTER, a ReplicatedMergeTree <table>_local on every server and the
	// Distributed <table> over them (and Theia's views in their clustered
	// form), adds missing columns to an existing clustered schema, and
	// inserts through the Distributed table synchronously, so that a shard
	// that cannot take its rows fails the insert, which is retried, and
	// the replicated tables drop the blocks a retry sends twice.
	Cluster string `mapstructure:"cluster"`
	// TTL, when positive, is added to a table this exporter creates as
	// `TTL timeInserted + INTERVAL <ttl> SECOND`, on servers that support it (19.6+).
	TTL time.Duration `mapstructure:"ttl"`
	// ClusterUUID is written to the clusterUUID column. When empty, the
	// resource attribute k8s.cluster.uid of each record's resource is used.
	ClusterUUID string `mapstructure:"cluster_uuid"`
	// Compression of the native protocol blocks: lz4 (default), zstd or none.
	Compression string `mapstructure:"compression"`
	// DialTimeout bounds connecting to the server.
	DialTimeout time.Duration `mapstructure:"dial_timeout"`
	// TLS is used with tls:// endpoints: ca_file, insecure_skip_verify,
	// client certificates, server_name_override.
	TLS configtls.ClientConfig `mapstructure:"tls"`

	_ struct{}
}

// identifier is what we accept as a database or table name: it is quoted with
// backticks in every statement, so only refuse what would need escaping.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// clusterName is what we accept as a cluster name: it is quoted with
// backticks and in string literals, so refuse what would need escaping.
var clusterName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

var compressions = map[string]bool{"lz4": true, "zstd": true, "none": true}

// Validate checks the configuration; the collector calls it after unmarshalling.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := c.endpoint(); err != nil {
		errs = append(errs, err)
	}
	if !identifier.MatchString(c.Database) {
		errs = append(errs, fmt.Errorf("database: not a plain identifier (got %q); use letters, digits and _, not starting with a digit", c.Database))
	}
	if !identifier.MatchString(c.Table) {
		errs = append(errs, fmt.Errorf("table: not a plain identifier (got %q); use letters, digits and _, not starting with a digit", c.Table))
	}
	if c.Cluster != "" && !clusterName.MatchString(c.Cluster) {
		errs = append(errs, fmt.Errorf("cluster: not a cluster name (got %q); use the name of a cluster in the servers' remote_servers: letters, digits, _, - and ., not starting with a digit", c.Cluster))
	}
	if c.Cluster != "" && strings.HasSuffix(c.Table, flowtable.LocalSuffix) {
		errs = append(errs, fmt.Errorf("table: with cluster, name the Distributed table, not the local one (got %q); set table: %s, and the exporter uses %s on each server",
			c.Table, strings.TrimSuffix(c.Table, flowtable.LocalSuffix), c.Table))
	}
	if c.TTL < 0 {
		errs = append(errs, fmt.Errorf("ttl: must not be negative (got %s); set 0 for no TTL, or a duration such as 72h", c.TTL))
	}
	if c.TTL > 0 && c.TTL < time.Second {
		errs = append(errs, fmt.Errorf("ttl: below ClickHouse's one-second resolution (got %s); set 0 for no TTL, or at least 1s", c.TTL))
	}
	if !compressions[c.Compression] {
		errs = append(errs, fmt.Errorf("compression: unknown (got %q); use lz4, zstd or none", c.Compression))
	}
	errs = configcheck.Positive(errs, "dial_timeout", c.DialTimeout, "set a duration such as 10s")
	return errors.Join(errs...)
}

// endpoint parses Endpoint into host:port and whether TLS is used.
func (c *Config) endpoint() (addr string, secure bool, err error) {
	if c.Endpoint == "" {
		return "", false, errors.New(`endpoint: required (got ""); set tcp://host:9000 or tls://host:9440`)
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return "", false, fmt.Errorf("endpoint: not a URL (got %q: %w); set tcp://host:9000 or tls://host:9440", c.Endpoint, err)
	}
	switch u.Scheme {
	case "tcp":
	case "tls":
		secure = true
	case "http", "https":
		return "", false, fmt.Errorf("endpoint: the HTTP interface is not supported (got %q); use the native protocol, tcp://host:9000 or tls://host:9440, which every ClickHouse version speaks", c.Endpoint)
	default:
		return "", false, fmt.Errorf("endpoint: scheme must be tcp:// or tls:// (got %q); set tcp://host:9000 or tls://host:9440", c.Endpoint)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", false, fmt.Errorf("endpoint: must be scheme://host:port only (got %q); set username, password and database separately", c.Endpoint)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return "", false, fmt.Errorf("endpoint: no host (got %q); set tcp://host:9000 or tls://host:9440", c.Endpoint)
	}
	if port == "" {
		port = "9000"
		if secure {
			port = "9440"
		}
	}
	return net.JoinHostPort(host, port), secure, nil
}

// credentials returns the user and password: configured values first, then
// the environment, then ClickHouse's "default" user.
func (c *Config) credentials() (user, password string) {
	user, password = c.Username, string(c.Password)
	if user == "" {
		user = os.Getenv(envUsername)
	}
	if password == "" {
		password = os.Getenv(envPassword)
	}
	if user == "" {
		user = "default"
	}
	return user, password
}
