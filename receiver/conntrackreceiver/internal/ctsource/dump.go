package ctsource

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/netfilter"
	"golang.org/x/sys/unix"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

const (
	// dumpBufferSize is the size of each receive buffer of a dump. The
	// kernel fills each dump message batch up to the reader's buffer, at most
	// 32 KiB, so a batch always fits (a larger socket receive buffer or read
	// does not make the batches larger: testbed/results.md).
	dumpBufferSize = 64 << 10
	// dumpBuffers is how many batches can be in flight between the goroutine
	// that reads a dump and the one that decodes it.
	dumpBuffers = 4
	// dumpTimeout bounds a dump the kernel stops answering.
	dumpTimeout = 2 * time.Minute

	ctGet = 1 // IPCTNL_MSG_CT_GET (ctaZone: decode.go)

	nlmsgHdrLen = 16 // struct nlmsghdr
)

// errTruncated: a netlink message batch did not fit the receive buffer.
var errTruncated = errors.New("netlink message batch larger than the receive buffer")

// dumper reads conntrack dumps batch by batch as the kernel sends them
// (mdlayher/netlink's Receive and ti-mo/conntrack's Dump gather the whole
// reply first, which holds every entry of the table in memory at once).
//
// The kernel builds the next batch of a dump inside the read that takes the
// previous one, so reading is where the kernel's half of a dump's cost is
// paid: a second goroutine reads while the caller's decodes and hands the
// entries over, and the two halves overlap when a second core is free.
type dumper struct {
	nl   *netlink.Conn
	raw  syscall.RawConn
	bufs [dumpBuffers][]byte
	dec  flowDecoder
	conn store.Conn
}

func (d *dumper) open(cfg *netlink.Config) error {
	nl, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return err
	}
	raw, err := nl.SyscallConn()
	if err != nil {
		nl.Close()
		return err
	}
	d.nl, d.raw = nl, raw
	for i := range d.bufs {
		d.bufs[i] = make([]byte, dumpBufferSize)
	}
	return nil
}

func (d *dumper) close() error {
	if d.nl == nil {
		return nil
	}
	return d.nl.Close()
}

// DumpZone hands each entry of one zone to fn as the kernel sends it,
// converted (Convert), and returns how many it handed over: only a few
// receive buffers of the dump are in memory at a time. The connection fn
// gets is valid until fn returns, and fn may modify it; fn runs on the
// caller's goroutine. The zone is also sent to the kernel as a dump filter
// (Linux ≥ 6.8); older kernels ignore it and send every entry, so callers
// re-check the zone. After an error (ENOBUFS included: see IsNoBufs) the
// socket may still hold the rest of the dump: close the Source.
func (s *Source) DumpZone(zone uint16, fn func(*store.Conn)) (int, error) {
	n, err := s.dump(zone, fn)
	if err != nil {
		return n, netlinkError(s.ns, fmt.Sprintf("dump of zone %d failed", zone), err, "it is retried at the next poll")
	}
	return n, nil
}

// batch is one read of a dump: the bytes read, or the read's error.
type batch struct {
	b   []byte
	err error
}

func (d *dumper) dump(zone uint16, fn func(*store.Conn)) (int, error) {
	req, err := netfilter.MarshalNetlink(netfilter.Header{
		SubsystemID: netfilter.NFSubsysCTNetlink,
		MessageType: ctGet,
		Family:      netfilter.ProtoUnspec, // both IPv4 and IPv6
		Flags:       netlink.Request | netlink.Dump,
	}, []netfilter.Attribute{{Type: ctaZone, Data: netfilter.Uint16Bytes(zone)}})
	if err != nil {
		return 0, err
	}
	if err := d.nl.SetReadDeadline(time.Now().Add(dumpTimeout)); err != nil {
		return 0, err
	}
	sent, err := d.nl.Send(req)
	if err != nil {
		return 0, err
	}
	return d.stream(sent.Header.Sequence, d.recv, fn)
}

// stream decodes the reply to request seq while a second goroutine reads it
// with recv, and hands each entry to fn.
func (d *dumper) stream(seq uint32, recv func([]byte) (int, error), fn func(*store.Conn)) (int, error) {
	free, full := make(chan []byte, dumpBuffers), make(chan batch, dumpBuffers)
	for _, b := range d.bufs {
		free <- b
	}
	go read(seq, recv, free, full)
	// Every batch is taken from full until the reader closes it, so the
	// reader is gone when dump returns; after an error, free is closed and
	// the reader stops at its next read.
	var count int
	var derr error
	for bt := range full {
		if derr != nil {
			continue
		}
		derr = bt.err
		if derr == nil {
			var done bool
			if done, derr = d.parseBatch(bt.b, seq, fn, &count); done {
				continue // the reader saw the end too
			}
		}
		if derr != nil {
			close(free)
			continue
		}
		free <- bt.b[:cap(bt.b)]
	}
	return count, derr
}

// read reads the reply to request seq with recv into the buffers it takes
// from free, handing each batch to full, until the end of the dump, an
// error, or free is closed; then it closes full.
func read(seq uint32, recv func([]byte) (int, error), free <-chan []byte, full chan<- batch) {
	defer close(full)
	for buf := range free {
		n, err := recv(buf)
		if err != nil {
			full <- batch{err: err}
			return
		}
		full <- batch{b: buf[:n]}
		if endOfDump(buf[:n], seq) {
			return
		}
	}
}

// recv reads one message batch into buf, waiting in the runtime's poller.
func (d *dumper) recv(buf []byte) (int, error) {
	var n int
	var rerr error
	err := d.raw.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_TRUNC)
		return rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n > len(buf):
		return 0, fmt.Errorf("%w (got %d bytes, buffer %d)", errTruncated, n, len(buf))
	}
	return n, nil
}

// message is one netlink message of a batch.
type message struct {
	typ  netlink.HeaderType
	seq  uint32
	data []byte // after the header
}

// nextMessage splits the first message off b; ok is false at the end of b.
func nextMessage(b []byte) (m message, rest []byte, ok bool, err error) {
	if len(b) < nlmsgHdrLen {
		return m, nil, false, nil
	}
	l := int(binary.NativeEndian.Uint32(b[0:4]))
	if l < nlmsgHdrLen || l > len(b) {
		return m, nil, false, fmt.Errorf("malformed netlink message (length %d, %d bytes left)", l, len(b))
	}
	m = message{
		typ:  netlink.HeaderType(binary.NativeEndian.Uint16(b[4:6])),
		seq:  binary.NativeEndian.Uint32(b[8:12]),
		data: b[nlmsgHdrLen:l],
	}
	return m, b[min(len(b), (l+3)&^3):], true, nil
}

// ends reports whether m, a message of the reply to a dump, ends it, and
// with which error: a Done, or an Error with an errno (an Error with 0 is an
// acknowledgement). Both carry an errno (negative), 0 for none.
func (m *message) ends() (bool, error) {
	if m.typ != netlink.Done && m.typ != netlink.Error {
		return false, nil
	}
	var errno int32
	if len(m.data) >= 4 {
		errno = int32(binary.NativeEndian.Uint32(m.data[:4]))
	}
	if errno != 0 {
		return true, unix.Errno(-errno)
	}
	return m.typ == netlink.Done, nil
}

// endOfDump reports whether batch b ends the reply to request seq (or is
// malformed: the decoder reports that).
func endOfDump(b []byte, seq uint32) bool {
	for {
		m, rest, ok, err := nextMessage(b)
		if err != nil {
			return true
		}
		if !ok {
			return false
		}
		if end, _ := m.ends(); end && m.seq == seq {
			return true
		}
		b = rest
	}
}

// parseBatch decodes the messages of one batch of the reply to request seq,
// handing each entry to fn; done reports the end of the dump.
func (d *dumper) parseBatch(b []byte, seq uint32, fn func(*store.Conn), count *int) (done bool, err error) {
	for {
		m, rest, ok, err := nextMessage(b)
		if err != nil || !ok {
			return false, err
		}
		b = rest
		if m.seq != seq {
			continue // left over from an earlier request
		}
		if end, err := m.ends(); end {
			return true, err
		}
		// Dump replies are IPCTNL_MSG_CT_NEW messages of the ctnetlink
		// subsystem (the high byte of the type).
		if netfilter.SubsystemID(m.typ>>8) != netfilter.NFSubsysCTNetlink {
			continue
		}
		f, err := d.dec.decode(m.data)
		if err != nil {
			return false, fmt.Errorf("cannot decode a conntrack entry: %w", err)
		}
		Convert(f, &d.conn)
		*count++
		fn(&d.conn)
	}
}
