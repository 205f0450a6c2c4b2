package ctsource

import (
	"errors"
	"fmt"

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
		return nil, fmt.Errorf("open conntrack netlink socket%s: %w", where(ns), classify(err))
	}
	return &Source{ns: ns, conn: c}, nil
}

func netlinkConfig(ns *Namespace) *netlink.Config {
	if fd := ns.FD(); fd >= 0 {
		return &netlink.Config{NetNS: fd}
	}
	return nil
}

func where(ns *Namespace) string {
	if ns.Path() == "" {
		return ""
	}
	return " in netns " + ns.Path()
}

// Probe checks that the table can be read (netlink needs CAP_NET_ADMIN) and
// returns the number of entries the kernel holds.
func (s *Source) Probe() (int, error) {
	st, err := s.conn.StatsGlobal()
	if err != nil {
		return 0, fmt.Errorf("read conntrack%s: %w", where(s.ns), classify(err))
	}
	return int(st.Entries), nil
}

// DumpZone returns the entries of one zone. The zone is also sent to the
// kernel as a dump filter (Linux ≥ 6.8); older kernels ignore it and return
// every entry, so callers re-check the zone.
func (s *Source) DumpZone(zone uint16) ([]conntrack.Flow, error) {
	fs, err := s.conn.DumpFilter(conntrack.NewFilter().Zone(zone), nil)
	if err != nil {
		return fs, fmt.Errorf("dump conntrack zone %d%s: %w", zone, where(s.ns), classify(err))
	}
	return fs, nil
}

// Close closes the socket.
func (s *Source) Close() error { return s.conn.Close() }

// classify turns a permission error into ErrNoPermission; others pass through.
func classify(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w: %v", ErrNoPermission, err)
	}
	return err
}

// IsNoBufs reports whether err is the kernel saying the socket's receive
// buffer overflowed (ENOBUFS): the dump or event stream lost messages.
func IsNoBufs(err error) bool { return errors.Is(err, unix.ENOBUFS) }
