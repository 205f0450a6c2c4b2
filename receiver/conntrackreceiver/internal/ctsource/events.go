package ctsource

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/ti-mo/netfilter"
	"golang.org/x/sys/unix"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

const (
	// eventReadBuffer is the socket buffer for DESTROY events; a burst of
	// closing connections larger than this overflows (ENOBUFS), which is
	// reported.
	eventReadBuffer = 8 << 20
	// eventBatch is how many event datagrams one read (recvmmsg) takes at
	// most; eventSlot is the room for one (a DESTROY message is a few
	// hundred bytes; a larger one is reported as truncated).
	eventBatch = 256
	eventSlot  = 2048
	// eventLinger is the pause after a read that emptied the socket: the
	// events of the next eventLinger are then read in one wake-up (about a
	// hundred at 10k connections/s, ~100 KB of the socket buffer) instead of
	// one wake-up each. DESTROY events are applied at the next poll anyway.
	eventLinger = 10 * time.Millisecond

	ctDelete = 2 // IPCTNL_MSG_CT_DELETE: a DESTROY event's message type
)

// errTruncatedEvent: an event datagram did not fit its slot.
var errTruncatedEvent = fmt.Errorf("conntrack event larger than %d bytes", eventSlot)

// Events is a subscription to conntrack DESTROY events: the only events that
// carry a connection's final counters (NEW and UPDATE carry none). It reads
// the socket itself, many datagrams per system call and wake-up, and decodes
// them without allocating (ti-mo/conntrack's Listen takes two receive calls,
// a goroutine hand-off and about 20 allocations per event).
//
// The socket is a blocking one, outside the runtime's network poller: the
// poller's edge-triggered epoll would wake an idle thread for every event
// datagram arriving while Run lingers (10k wake-ups/s at 10k connections/s,
// most of the CPU left once reading was batched). Run's thread blocks in
// recvmmsg only while the socket is empty; SO_RCVTIMEO bounds that wait so
// that Run sees its context end.
type Events struct {
	fd   int
	buf  []byte
	iovs []unix.Iovec
	hdrs []unix.Mmsghdr
	dec  flowDecoder
	// conns holds the converted events of one read.
	conns []store.Conn
}

// eventWait bounds a read of an empty event socket: how long Run takes to see
// its context end.
const eventWait = 100 * time.Millisecond

// ListenDestroy subscribes to DESTROY events in ns.
func ListenDestroy(ns *Namespace) (*Events, error) {
	fd := -1
	err := ns.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	})
	if err != nil {
		return nil, netlinkError(ns, "cannot open the conntrack event socket", err, fixModule)
	}
	if err := subscribe(fd); err != nil {
		unix.Close(fd)
		return nil, netlinkError(ns, "cannot subscribe to conntrack DESTROY events", err, fixModule)
	}
	e := &Events{fd: fd, buf: make([]byte, eventBatch*eventSlot),
		iovs: make([]unix.Iovec, eventBatch), hdrs: make([]unix.Mmsghdr, eventBatch),
		conns: make([]store.Conn, 0, eventBatch)}
	for i := range e.hdrs {
		e.iovs[i].Base = &e.buf[i*eventSlot]
		e.iovs[i].SetLen(eventSlot)
		e.hdrs[i].Hdr.Iov = &e.iovs[i]
		e.hdrs[i].Hdr.SetIovlen(1)
	}
	return e, nil
}

// subscribe binds fd, bounds its reads by eventWait, gives it eventReadBuffer
// and joins the DESTROY group.
//
// The buffer is set above net.core.rmem_max (SO_RCVBUFFORCE: the receiver
// has CAP_NET_ADMIN, which conntrack needs anyway), or else up to it: an
// event takes about 1.3 KB of it, so Linux's default cap (twice 208 KB) holds
// only ~330 events, 33 ms at 10k/s. A larger buffer makes overflow rarer;
// failing to set it is not fatal.
func subscribe(fd int) error {
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	tv := unix.NsecToTimeval(eventWait.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, eventReadBuffer); err != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, eventReadBuffer)
	}
	return unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(netfilter.GroupCTDestroy))
}

// Run hands the DESTROY events of each read to fn, converted (Convert), until
// ctx ends or the socket fails (it returns the error, e.g. ENOBUFS, or a
// message it cannot decode). When ctx ends, the events already in the socket
// are handed to fn too, then Run returns nil (within eventWait). fn runs on
// Run's goroutine; the slice is valid until fn returns. The socket is closed
// when Run returns.
func (e *Events) Run(ctx context.Context, fn func([]store.Conn)) error {
	defer unix.Close(e.fd)
	linger := time.NewTimer(eventLinger)
	linger.Stop()
	for {
		// While ctx lasts, wait for the first datagram (at most eventWait);
		// once it has ended, take what the socket holds.
		flags := unix.MSG_WAITFORONE
		if ctx.Err() != nil {
			flags = unix.MSG_DONTWAIT
		}
		n, err := e.read(flags)
		if err != nil {
			return err
		}
		if err := e.handle(n, fn); err != nil {
			return err
		}
		if n == eventBatch {
			continue
		}
		if ctx.Err() != nil {
			if flags == unix.MSG_DONTWAIT {
				return nil // the socket is empty
			}
			continue
		}
		if n == 0 {
			continue // eventWait passed without an event
		}
		linger.Reset(eventLinger)
		select {
		case <-ctx.Done():
			linger.Stop()
		case <-linger.C:
		}
	}
}

// handle converts the n datagrams of the last read and hands their DESTROY
// events to fn.
func (e *Events) handle(n int, fn func([]store.Conn)) error {
	e.conns = e.conns[:0]
	for i := range n {
		if e.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0 || int(e.hdrs[i].Len) > eventSlot {
			return errTruncatedEvent
		}
		if err := e.parse(e.buf[i*eventSlot : i*eventSlot+int(e.hdrs[i].Len)]); err != nil {
			return err
		}
	}
	if len(e.conns) > 0 {
		fn(e.conns)
	}
	return nil
}

// read takes up to eventBatch datagrams with one recvmmsg and returns how
// many it read: 0 when none came (EAGAIN: the socket is empty, or eventWait
// passed).
func (e *Events) read(flags int) (int, error) {
	for {
		r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(e.fd), uintptr(unsafe.Pointer(&e.hdrs[0])), uintptr(len(e.hdrs)),
			uintptr(flags), 0, 0)
		switch errno {
		case 0:
			return int(r), nil
		case unix.EAGAIN:
			return 0, nil
		case unix.EINTR:
			continue
		default:
			return 0, errno
		}
	}
}

// parse decodes the DESTROY messages of one datagram into e.conns.
func (e *Events) parse(b []byte) error {
	for {
		m, rest, ok, err := nextMessage(b)
		if err != nil || !ok {
			return err
		}
		b = rest
		if netfilter.SubsystemID(m.typ>>8) != netfilter.NFSubsysCTNetlink || m.typ&0xff != ctDelete {
			continue
		}
		f, err := e.dec.decode(m.data)
		if err != nil {
			return fmt.Errorf("cannot decode a conntrack DESTROY event: %w", err)
		}
		e.conns = append(e.conns, store.Conn{})
		Convert(f, &e.conns[len(e.conns)-1])
	}
}
