package ctsource

import (
	"context"

	"github.com/ti-mo/conntrack"
	"github.com/ti-mo/netfilter"
)

// eventReadBuffer is the socket buffer for DESTROY events; a burst of closing
// connections larger than this overflows (ENOBUFS), which is reported.
const eventReadBuffer = 8 << 20

// Events is a subscription to conntrack DESTROY events: the only events that
// carry a connection's final counters (NEW and UPDATE carry none).
type Events struct {
	conn *conntrack.Conn
	ch   chan conntrack.Event
	errc chan error
}

// ListenDestroy subscribes to DESTROY events in ns.
func ListenDestroy(ns *Namespace) (*Events, error) {
	c, err := conntrack.Dial(netlinkConfig(ns))
	if err != nil {
		return nil, netlinkError(ns, "cannot open the conntrack event socket", err, fixModule)
	}
	// A larger buffer makes overflow rarer; failing to set it is not fatal.
	_ = c.SetReadBuffer(eventReadBuffer)
	e := &Events{conn: c, ch: make(chan conntrack.Event, 1024)}
	e.errc, err = c.Listen(e.ch, 1, []netfilter.NetlinkGroup{netfilter.GroupCTDestroy})
	if err != nil {
		c.Close()
		return nil, netlinkError(ns, "cannot subscribe to conntrack DESTROY events", err, fixModule)
	}
	return e, nil
}

// Run hands each DESTROY event's flow to fn until ctx ends (it returns nil) or
// the socket fails (it returns the error, e.g. ENOBUFS). The socket is closed
// when Run returns.
func (e *Events) Run(ctx context.Context, fn func(*conntrack.Flow)) error {
	for {
		select {
		case ev := <-e.ch:
			if ev.Type == conntrack.EventDestroy && ev.Flow != nil {
				fn(ev.Flow)
			}
		case err := <-e.errc:
			e.close()
			return err
		case <-ctx.Done():
			e.close()
			return nil
		}
	}
}

// close closes the socket, draining the channels the library's worker may be
// blocked on so that Close (which waits for the worker) returns.
func (e *Events) close() {
	done := make(chan struct{})
	go func() {
		e.conn.Close()
		close(done)
	}()
	for {
		select {
		case <-e.ch:
		case <-e.errc:
		case <-done:
			return
		}
	}
}
