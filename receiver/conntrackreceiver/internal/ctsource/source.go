package ctsource

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// Source is a netlink socket onto one namespace's conntrack table.
type Source struct {
	ns   *Namespace
	conn *conntrack.Conn
}

// Dial opens a conntrack socket in ns.
func Dial(ns *Namespace) (*Source, error) {
	c, err := conntrack.Dial(netlinkConfig(ns))
	if err != nil {
		return nil, netlinkError(ns, "cannot open a conntrack netlink socket", err, fixModule)
	}
	return &Source{ns: ns, conn: c}, nil
}

func netlinkConfig(ns *Namespace) *netlink.Config {
	if fd := ns.FD(); fd >= 0 {
		return &netlink.Config{NetNS: fd}
	}
	return nil
}

// fixModule is the fix for a conntrack socket the kernel does not serve.
const fixModule = "check that the nf_conntrack kernel module is loaded (modprobe nf_conntrack)"

// netlinkError words a netlink failure in ns as `netns: what: error (got
// the namespace); fix`. A permission error wraps ErrNoPermission and
// says which capability is missing.
func netlinkError(ns *Namespace, what string, err error, fix string) error {
	got := "the collector's own namespace"
	if ns.Path() != "" {
		got = strconv.Quote(ns.Path())
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("netns: %s: %w: %v (got %s); the collector needs CAP_NET_ADMIN in that namespace: run it as root or add the NET_ADMIN capability (securityContext.capabilities.add: [NET_ADMIN])",
			what, ErrNoPermission, err, got)
	}
	return fmt.Errorf("netns: %s: %w (got %s); %s", what, err, got, fix)
}

// Probe checks that the table can be read (netlink needs CAP_NET_ADMIN) and
// returns the number of entries the kernel holds.
func (s *Source) Probe() (int, error) {
	st, err := s.conn.StatsGlobal()
	if err != nil {
		return 0, netlinkError(s.ns, "cannot read conntrack", err, fixModule)
	}
	return int(st.Entries), nil
}

// DumpZone returns the entries of one zone. The zone is also sent to the
// kernel as a dump filter (Linux ≥ 6.8); older kernels ignore it and return
// every entry, so callers re-check the zone.
func (s *Source) DumpZone(zone uint16) ([]conntrack.Flow, error) {
	fs, err := s.conn.DumpFilter(conntrack.NewFilter().Zone(zone), nil)
	if err != nil {
		return fs, netlinkError(s.ns, fmt.Sprintf("dump of zone %d failed", zone), err, "it is retried at the next poll")
	}
	return fs, nil
}

// Close closes the socket.
func (s *Source) Close() error { return s.conn.Close() }

// IsNoBufs reports whether err is the kernel saying the socket's receive
// buffer overflowed (ENOBUFS): the dump or event stream lost messages.
func IsNoBufs(err error) bool { return errors.Is(err, unix.ENOBUFS) }
