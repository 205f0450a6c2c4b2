package ctsource

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// Source is a netlink socket onto one namespace's conntrack table, and a
// second one its dumps are read from, one receive at a time (dump.go).
type Source struct {
	ns   *Namespace
	conn *conntrack.Conn
	dumper
}

// Dial opens a conntrack socket in ns.
func Dial(ns *Namespace) (*Source, error) {
	c, err := conntrack.Dial(netlinkConfig(ns))
	if err != nil {
		return nil, netlinkError(ns, "cannot open a conntrack netlink socket", err, fixModule)
	}
	s := &Source{ns: ns, conn: c}
	if err := s.dumper.open(netlinkConfig(ns)); err != nil {
		c.Close()
		return nil, netlinkError(ns, "cannot open a conntrack netlink socket", err, fixModule)
	}
	return s, nil
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

// Close closes the sockets.
func (s *Source) Close() error { return errors.Join(s.conn.Close(), s.dumper.close()) }

// IsNoBufs reports whether err is the kernel saying the socket's receive
// buffer overflowed (ENOBUFS): the dump or event stream lost messages.
func IsNoBufs(err error) bool { return errors.Is(err, unix.ENOBUFS) }
