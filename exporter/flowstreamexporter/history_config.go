package flowstreamexporter

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configtls"

	"github.com/flowtel/flowtel/internal/configcheck"
)

// HistoryConfig is where a stream whose since is older than the ring reads
// the records it no longer holds: the flows table the clickhouse_flows
// exporter writes. Without an endpoint there is no history, and streams see
// the ring only, as before.
type HistoryConfig struct {
	// Endpoint is ClickHouse's native protocol: tcp://host:9000 or
	// tls://host:9440 (the HTTP interface is not supported). Empty: no history.
	Endpoint string `mapstructure:"endpoint"`
	// Username and Password are a ClickHouse user that may read the table
	// (SELECT only is enough); the gateway holds them, never the clients.
	Username string              `mapstructure:"username"`
	Password configopaque.String `mapstructure:"password"`
	// Database and Table name the flows table: the clickhouse_flows
	// exporter's, or its Distributed table on a cluster.
	Database string `mapstructure:"database"`
	Table    string `mapstructure:"table"`
	// MaxRows bounds the rows one stream's history reads; a stream that
	// reaches it is told so (HistoryStatus.truncated) and where to go on.
	MaxRows int `mapstructure:"max_rows"`
	// QueryTimeout bounds one stream's history query.
	QueryTimeout time.Duration `mapstructure:"query_timeout"`
	// DialTimeout bounds connecting to the server.
	DialTimeout time.Duration `mapstructure:"dial_timeout"`
	// TLS is used with a tls:// endpoint.
	TLS configtls.ClientConfig `mapstructure:"tls"`

	_ struct{}
}

// enabled reports whether streams may be served history.
func (h *HistoryConfig) enabled() bool { return h.Endpoint != "" }

// plainName is what a database or table name may be: it is inlined in SQL
// between backticks, so nothing that would need escaping.
var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (h *HistoryConfig) validate() []error {
	if !h.enabled() {
		return nil
	}
	var errs []error
	if _, _, err := h.address(); err != nil {
		errs = append(errs, err)
	}
	if !plainName.MatchString(h.Database) {
		errs = append(errs, fmt.Errorf("history.database: not a plain name (got %q); use letters, digits and _, not starting with a digit", h.Database))
	}
	if !plainName.MatchString(h.Table) {
		errs = append(errs, fmt.Errorf("history.table: not a plain name (got %q); use letters, digits and _, not starting with a digit", h.Table))
	}
	errs = configcheck.Positive(errs, "history.max_rows", h.MaxRows, fmt.Sprintf("the default is %d", defaultHistoryMaxRows))
	errs = configcheck.Positive(errs, "history.query_timeout", h.QueryTimeout, "")
	errs = configcheck.Positive(errs, "history.dial_timeout", h.DialTimeout, "")
	return errs
}

// address is the endpoint's host:port, and whether it is TLS.
func (h *HistoryConfig) address() (string, bool, error) {
	u, err := url.Parse(h.Endpoint)
	if err != nil {
		return "", false, fmt.Errorf("history.endpoint: not a URL (got %q: %w); set tcp://host:9000 or tls://host:9440", h.Endpoint, err)
	}
	port := "9000"
	switch u.Scheme {
	case "tcp":
	case "tls":
		port = "9440"
	default:
		return "", false, fmt.Errorf("history.endpoint: scheme must be tcp:// or tls:// (got %q); ClickHouse's native protocol, not HTTP", h.Endpoint)
	}
	if u.Hostname() == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", false, fmt.Errorf("history.endpoint: must be scheme://host[:port] only (got %q); set username, password and database separately", h.Endpoint)
	}
	if p := u.Port(); p != "" {
		port = p
	}
	return net.JoinHostPort(u.Hostname(), port), u.Scheme == "tls", nil
}
