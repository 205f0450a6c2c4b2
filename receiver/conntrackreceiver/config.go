package conntrackreceiver

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/recordform"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/profile"
)

// Config is the conntrack receiver's configuration.
type Config struct {
	// PollInterval is how often the conntrack table is dumped (≥ 1s).
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// ActiveTimeout is how often a connection that keeps changing is exported.
	// Raised to PollInterval if smaller.
	ActiveTimeout time.Duration `mapstructure:"active_timeout"`
	// IdleTimeout is how long an unchanged connection waits before its idle
	// record. Raised to PollInterval if smaller.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// StaleTimeout removes a connection gone from conntrack whose final record
	// could not be exported in this time. Default 5m, or 2 × max(active, idle)
	// when either timeout is longer than 5m (as Antrea).
	StaleTimeout time.Duration `mapstructure:"stale_timeout"`
	// Protocols limits the reported protocols (tcp, udp, sctp). Unset: all
	// protocols; an empty list: none.
	Protocols []string `mapstructure:"protocols"`
	// Profile is the CNI profile: generic (zone 0) or antrea.
	Profile string `mapstructure:"profile"`
	// Zones overrides the profile's reported conntrack zones.
	Zones []uint16 `mapstructure:"zones"`
	// NetNS is the path of the network namespace to read (e.g.
	// /var/run/netns/X); empty: the collector's own namespace.
	NetNS string `mapstructure:"netns"`
	// EnableAccounting sets net.netfilter.nf_conntrack_acct=1 and
	// nf_conntrack_timestamp=1 in the namespace at start (both are per network
	// namespace and off by default): without them conntrack entries carry no
	// packet or byte counters and no start time. On by default; false leaves
	// the sysctls as they are and warns when they are off.
	EnableAccounting bool `mapstructure:"enable_accounting"`
	// SysctlPath is where the namespace's net sysctls are read and written
	// (the directory holding netfilter/nf_conntrack_acct). A container's
	// /proc/sys is read-only unless it is privileged, so a Pod mounts the
	// host's /proc/sys/net elsewhere, writable, and names that mount here.
	SysctlPath string `mapstructure:"sysctl_path"`
	// Events subscribes to conntrack DESTROY events so that connections that
	// open and close between two polls (refused ones: SYN answered by RST) are
	// reported with their final counters. On by default.
	Events bool `mapstructure:"events"`
	// MaxQueuedEvents bounds the DESTROY events waiting for the poll loop
	// (224 bytes each); events over it are shed and counted. The poll loop
	// applies the queue early when it is half full.
	MaxQueuedEvents int `mapstructure:"max_queued_events"`
	// MaxConnections bounds the connections held; new ones over it are shed
	// and counted. 0: no bound.
	MaxConnections int `mapstructure:"max_connections"`
	// Storage names a storage extension (e.g. file_storage) where the
	// receiver keeps what it last exported per connection, so that after a
	// restart it goes on from there instead of exporting each connection's
	// whole history again. Unset: a restart starts from scratch.
	Storage *component.ID `mapstructure:"storage"`
	// NodeName is the k8s.node.name resource attribute and the reporter Node
	// of every record. Default: the K8S_NODE_NAME environment variable.
	NodeName string `mapstructure:"node_name"`
	// Denied, when present, subscribes to an NFLOG group to which the CNI's
	// netfilter rules log the packets they drop or reject, and reports them
	// as denied connections (see the README's "Denied connections").
	Denied configoptional.Optional[DeniedConfig] `mapstructure:"denied"`
	// Encoding is the form the records are handed on in (decision D13):
	// attributes (default, the public schema) or compact, flowtel's own
	// form, when flowtel's k8s_flow alone reads them, as in the shipped node
	// configuration: it saves encoding every attribute here and decoding
	// them again in k8s_flow.
	Encoding string `mapstructure:"encoding"`

	_ struct{}
}

// DeniedConfig configures the denied-connection records.
type DeniedConfig struct {
	// NFLOGGroup is the NFLOG group the deny rules log to (iptables
	// `-j NFLOG --nflog-group N`, nftables `log group N`). Default 100
	// (kube-router's).
	NFLOGGroup uint16 `mapstructure:"nflog_group"`
	// IdleTimeout: a denied connection with no logged packet for this long
	// is exported (≥ 1s), then lingers as long as conntrack keeps an
	// unanswered entry of its protocol, so that a later packet continues it.
	// 0: the receiver's idle_timeout.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// ActiveTimeout: a denied connection is first exported this long after
	// its first logged packet, then, while packets keep being logged, this
	// often with the packets since its previous record (≥ 1s). 0: the
	// receiver's active_timeout, so that a denied connection reaches the
	// gateway as soon as the source Node's conntrack half of it does (an
	// ingress Drop pairs with that half).
	ActiveTimeout time.Duration `mapstructure:"active_timeout"`
	// MaxRecords bounds the denied connections held; packets of new
	// 5-tuples over it are counted and not reported. 0: no bound.
	MaxRecords int `mapstructure:"max_records"`
	// MaxRate bounds the logged packets accounted per second (burst: one
	// second's worth); packets over it are counted and not reported. 0: no
	// bound.
	MaxRate int `mapstructure:"max_rate"`

	_ struct{}
}

const (
	defaultPollInterval  = 5 * time.Second
	defaultActiveTimeout = 5 * time.Second
	defaultIdleTimeout   = 15 * time.Second
	defaultStaleTimeout  = 5 * time.Minute
	defaultMaxConns      = 1_000_000
	// defaultMaxQueuedEvents holds 10 s of 10k connections closing per second
	// (~22 MB at most).
	defaultMaxQueuedEvents = 100_000
	minPollInterval        = time.Second

	defaultNFLOGGroup       = 100
	defaultDeniedMaxRecords = 10_000
	defaultDeniedMaxRate    = 1000
	minDeniedTimeout        = time.Second
	// nodeNameEnv is the variable a DaemonSet sets from spec.nodeName.
	nodeNameEnv = "K8S_NODE_NAME"
	// defaultSysctlPath is the net sysctls of the reading thread's namespace.
	defaultSysctlPath = "/proc/sys/net"
)

func createDefaultConfig() *Config {
	return &Config{
		PollInterval:     defaultPollInterval,
		ActiveTimeout:    defaultActiveTimeout,
		IdleTimeout:      defaultIdleTimeout,
		Profile:          profile.Generic,
		Events:           true,
		EnableAccounting: true,
		SysctlPath:       defaultSysctlPath,
		MaxQueuedEvents:  defaultMaxQueuedEvents,
		MaxConnections:   defaultMaxConns,
		NodeName:         os.Getenv(nodeNameEnv),
		Denied:           configoptional.Default(defaultDeniedConfig()),
		Encoding:         recordform.Attributes,
	}
}

func defaultDeniedConfig() DeniedConfig {
	return DeniedConfig{
		NFLOGGroup: defaultNFLOGGroup,
		MaxRecords: defaultDeniedMaxRecords,
		MaxRate:    defaultDeniedMaxRate,
	}
}

// check validates the denied section (not named Validate: Config.Validate
// reports its errors once, under the denied key).
func (d *DeniedConfig) check() []error {
	var errs []error
	for _, t := range []struct {
		key string
		v   time.Duration
	}{{"idle_timeout", d.IdleTimeout}, {"active_timeout", d.ActiveTimeout}} {
		if t.v < 0 || (t.v > 0 && t.v < minDeniedTimeout) {
			errs = append(errs, fmt.Errorf("denied.%s: too short (got %v); set it to %v or more, or leave it unset for the receiver's %s", t.key, t.v, minDeniedTimeout, t.key))
		}
	}
	if d.MaxRecords < 0 {
		errs = append(errs, fmt.Errorf("denied.max_records: must not be negative (got %d); set a bound such as %d, or 0 for no bound", d.MaxRecords, defaultDeniedMaxRecords))
	}
	if d.MaxRate < 0 {
		errs = append(errs, fmt.Errorf("denied.max_rate: must not be negative (got %d); set packets per second such as %d, or 0 for no bound", d.MaxRate, defaultDeniedMaxRate))
	}
	return errs
}

// Validate checks the configuration; each error names the offending key, what
// is wrong with it and how to fix it.
func (c *Config) Validate() error {
	var errs []error
	if c.PollInterval < minPollInterval {
		errs = append(errs, fmt.Errorf("poll_interval: too short (got %v); set it to %v or more", c.PollInterval, minPollInterval))
	}
	if c.ActiveTimeout <= 0 {
		errs = append(errs, fmt.Errorf("active_timeout: must be positive (got %v); set a duration such as %v", c.ActiveTimeout, defaultActiveTimeout))
	}
	if c.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("idle_timeout: must be positive (got %v); set a duration such as %v", c.IdleTimeout, defaultIdleTimeout))
	}
	if c.StaleTimeout < 0 {
		errs = append(errs, fmt.Errorf("stale_timeout: must not be negative (got %v); leave it unset or 0 for the default (%v, or twice the longer of active_timeout and idle_timeout)", c.StaleTimeout, defaultStaleTimeout))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("max_connections: must not be negative (got %d); set a bound such as %d, or 0 for no bound", c.MaxConnections, defaultMaxConns))
	}
	if c.Events && c.MaxQueuedEvents <= 0 {
		errs = append(errs, fmt.Errorf("max_queued_events: must be positive when events are on (got %d); set a bound such as %d, or events: false", c.MaxQueuedEvents, defaultMaxQueuedEvents))
	}
	if _, err := c.protocolNumbers(); err != nil {
		errs = append(errs, err)
	}
	if _, err := profile.New(c.profileConfig(nil)); err != nil {
		errs = append(errs, err)
	}
	if c.Denied.HasValue() {
		errs = append(errs, c.Denied.Get().check()...)
	}
	if err := recordform.Check(c.Encoding, "flowtel's k8s_flow"); err != nil {
		errs = append(errs, err)
	}
	if c.NetNS != "" && !strings.HasPrefix(c.NetNS, "/") {
		errs = append(errs, fmt.Errorf("netns: must be an absolute path (got %q); use a path such as /var/run/netns/<name> or /proc/<pid>/ns/net, or leave it empty for the collector's own namespace", c.NetNS))
	}
	if !strings.HasPrefix(c.SysctlPath, "/") {
		errs = append(errs, fmt.Errorf("sysctl_path: must be an absolute path (got %q); use the directory holding netfilter/nf_conntrack_acct, such as %s or a writable mount of the host's /proc/sys/net", c.SysctlPath, defaultSysctlPath))
	}
	return errors.Join(errs...)
}

// protocolNumbers maps the protocols list to IANA numbers: nil stays nil
// (all protocols), an empty list stays empty (none).
func (c *Config) protocolNumbers() ([]uint8, error) {
	if c.Protocols == nil {
		return nil, nil
	}
	out := make([]uint8, 0, len(c.Protocols))
	for _, name := range c.Protocols {
		n := strings.ToLower(strings.TrimSpace(name))
		p, ok := flowrecord.ProtocolNumber(n)
		if !ok || (n != "tcp" && n != "udp" && n != "sctp") {
			return nil, fmt.Errorf("protocols: not a protocol this receiver filters on (got %q); list only tcp, udp or sctp, or leave protocols unset for all", name)
		}
		out = append(out, p)
	}
	return out, nil
}

func (c *Config) profileConfig(protocols []uint8) profile.Config {
	return profile.Config{Name: c.Profile, Zones: c.Zones, Protocols: protocols}
}

// timeouts returns the active, idle and stale timeouts in effect: active and
// idle raised to the poll interval, stale defaulted as Antrea does.
func (c *Config) timeouts() (active, idle, stale time.Duration) {
	active, idle = max(c.ActiveTimeout, c.PollInterval), max(c.IdleTimeout, c.PollInterval)
	stale = c.StaleTimeout
	if stale == 0 {
		stale = defaultStaleTimeout
		if m := max(active, idle); m > defaultStaleTimeout {
			stale = 2 * m
		}
	}
	return active, idle, stale
}

// deniedTimeouts returns the denied path's active and idle timeouts in
// effect: its own when set, else the receiver's, at least minDeniedTimeout.
func (c *Config) deniedTimeouts() (active, idle time.Duration) {
	d := c.Denied.Get()
	active, idle = cmp.Or(d.ActiveTimeout, c.ActiveTimeout), cmp.Or(d.IdleTimeout, c.IdleTimeout)
	return max(active, minDeniedTimeout), max(idle, minDeniedTimeout)
}

// nodeName is the configured node name, else the host name.
func (c *Config) nodeName() string {
	if c.NodeName != "" {
		return c.NodeName
	}
	h, _ := os.Hostname()
	return h
}
