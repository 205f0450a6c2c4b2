package ctsource

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"github.com/ti-mo/netfilter"
	"golang.org/x/sys/unix"
)

const (
	// dumpBufferSize is the one receive buffer a dump is read through. The
	// kernel fills each dump message batch up to the reader's buffer, at most
	// 32 KiB, so a batch always fits.
	dumpBufferSize = 64 << 10
	// dumpTimeout bounds a dump the kernel stops answering.
	dumpTimeout = 2 * time.Minute

	ctGet = 1 // IPCTNL_MSG_CT_GET (ctaZone: nflog.go)
)

// errTruncated: a netlink message batch did not fit the receive buffer.
var errTruncated = errors.New("netlink message batch larger than the receive buffer")

// dumper reads conntrack dumps batch by batch as the kernel sends them
// (mdlayher/netlink's Receive and ti-mo/conntrack's Dump gather the whole
// reply first, which holds every entry of the table in memory at once).
type dumper struct {
	nl  *netlink.Conn
	raw syscall.RawConn
	buf []byte
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
	d.nl, d.raw, d.buf = nl, raw, make([]byte, dumpBufferSize)
	return nil
}

func (d *dumper) close() error {
	if d.nl == nil {
		return nil
	}
	return d.nl.Close()
}

// DumpZone hands each entry of one zone to fn as the kernel sends it, and
// returns how many it handed over: only one receive buffer of the dump is in
// memory at a time, and the flow fn gets is its own. The zone is also sent
// to the kernel as a dump filter (Linux ≥ 6.8); older kernels ignore it and
// send every entry, so callers re-check the zone. After an error (ENOBUFS
// included: see IsNoBufs) the socket may still hold the rest of the dump:
// close the Source.
func (s *Source) DumpZone(zone uint16, fn func(*conntrack.Flow)) (int, error) {
	n, err := s.dump(zone, fn)
	if err != nil {
		return n, netlinkError(s.ns, fmt.Sprintf("dump of zone %d failed", zone), err, "it is retried at the next poll")
	}
	return n, nil
}

func (d *dumper) dump(zone uint16, fn func(*conntrack.Flow)) (int, error) {
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
	var count int
	for {
		n, err := d.recv()
		if err != nil {
			return count, err
		}
		done, err := parseBatch(d.buf[:n], sent.Header.Sequence, fn, &count)
		if err != nil || done {
			return count, err
		}
	}
}

// recv reads one message batch into d.buf, waiting in the runtime's poller.
func (d *dumper) recv() (int, error) {
	var n int
	var rerr error
	err := d.raw.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), d.buf, unix.MSG_TRUNC)
		return rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n > len(d.buf):
		return 0, fmt.Errorf("%w (got %d bytes, buffer %d)", errTruncated, n, len(d.buf))
	}
	return n, nil
}

// parseBatch decodes the messages of one batch of the reply to request seq,
// handing each entry to fn; done reports the end of the dump.
func parseBatch(b []byte, seq uint32, fn func(*conntrack.Flow), count *int) (done bool, err error) {
	const hdrLen = 16 // struct nlmsghdr
	for len(b) >= hdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < hdrLen || l > len(b) {
			return false, fmt.Errorf("malformed netlink message (length %d, %d bytes left)", l, len(b))
		}
		m := netlink.Message{
			Header: netlink.Header{
				Length:   uint32(l),
				Type:     netlink.HeaderType(binary.NativeEndian.Uint16(b[4:6])),
				Flags:    netlink.HeaderFlags(binary.NativeEndian.Uint16(b[6:8])),
				Sequence: binary.NativeEndian.Uint32(b[8:12]),
				PID:      binary.NativeEndian.Uint32(b[12:16]),
			},
			Data: b[hdrLen:l],
		}
		b = b[min(len(b), (l+3)&^3):]
		if m.Header.Sequence != seq {
			continue // left over from an earlier request
		}
		switch m.Header.Type {
		case netlink.Done, netlink.Error:
			// Both carry an errno (negative), 0 for none; an Error with 0 is
			// an acknowledgement, a Done ends the dump.
			if len(m.Data) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(m.Data[:4])); e != 0 {
					return true, unix.Errno(-e)
				}
			}
			if m.Header.Type == netlink.Done {
				return true, nil
			}
		case netlink.Noop, netlink.Overrun:
		default:
			// Dump replies are IPCTNL_MSG_CT_NEW messages, which decode as
			// events (of type update).
			var ev conntrack.Event
			if err := ev.Unmarshal(m); err != nil {
				return false, fmt.Errorf("cannot decode a conntrack entry: %w", err)
			}
			if ev.Flow != nil {
				*count++
				fn(ev.Flow)
			}
		}
	}
	return false, nil
}
