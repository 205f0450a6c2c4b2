package ctsource

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/netfilter"
	"golang.org/x/sys/unix"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/deny"
)

// NFLOG over nfnetlink (include/uapi/linux/netfilter/nfnetlink_log.h): the
// subsystem's message types, configuration attributes and commands, and the
// attributes of a logged packet this package reads.
const (
	nflogMsgPacket netfilter.MessageType = 0
	nflogMsgConfig netfilter.MessageType = 1

	nflogCfgCmd     = 1 // struct nfulnl_msg_config_cmd { u8 command }
	nflogCfgMode    = 2 // struct nfulnl_msg_config_mode { be32 copy_range; u8 copy_mode; u8 pad }
	nflogCfgTimeout = 4 // be32, flush timeout in 1/100 s
	nflogCfgFlags   = 6 // be16

	nflogCmdBind    = 1
	nflogCopyPacket = 2
	nflogFlagSeq    = 0x1 // a per-group sequence number on every packet
	nflogFlagCT     = 0x4 // the packet's conntrack entry (NFULA_CT)

	nflogAttrPacketHdr = 1 // struct nfulnl_msg_packet_hdr { be16 hw_protocol; u8 hook; u8 pad }
	nflogAttrPayload   = 9
	nflogAttrPrefix    = 10
	nflogAttrSeq       = 12
	nflogAttrCT        = 18

	// NFULA_CT holds a ctnetlink entry: its attributes are in decode.go.

	// nflogFlushTimeout makes the kernel hand a partly filled batch over
	// after 100 ms (its default is 1 s).
	nflogFlushTimeout = 10
)

// LoggedPacket is one packet an NFLOG rule logged. Payload (the packet from
// its network header on, cut at the copy range) and Prefix alias the
// receive buffer: they are valid only during the callback.
type LoggedPacket struct {
	// HWProtocol is the packet's EtherType (0x0800 IPv4, 0x86dd IPv6).
	HWProtocol uint16
	Payload    []byte
	// Prefix is the rule's --nflog-prefix, without its terminating NUL.
	Prefix []byte
	// Seq is the group's sequence number of the packet (HasSeq: present).
	Seq    uint32
	HasSeq bool
	// CT is what the packet's (unconfirmed) conntrack entry says, when the
	// kernel sent it (HasCT).
	CT    deny.Conntrack
	HasCT bool
}

// NFLOG is a subscription to one NFLOG group of a namespace.
type NFLOG struct {
	ns    *Namespace
	conn  *netfilter.Conn
	group uint16
	ct    bool
}

// ListenNFLOG binds a socket in ns to NFLOG group, asking for the first
// copyRange bytes of each packet and a sequence number on each.
func ListenNFLOG(ns *Namespace, group uint16, copyRange uint32) (*NFLOG, error) {
	c, err := netfilter.Dial(netlinkConfig(ns))
	if err != nil {
		return nil, netlinkError(ns, "cannot open an NFLOG netlink socket", err, fixNFLOG)
	}
	_ = c.SetReadBuffer(eventReadBuffer)
	n := &NFLOG{ns: ns, conn: c, group: group}
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, copyRange)
	mode[4] = nflogCopyPacket
	for _, a := range []netfilter.Attribute{
		{Type: nflogCfgCmd, Data: []byte{nflogCmdBind}},
		{Type: nflogCfgMode, Data: mode},
		{Type: nflogCfgTimeout, Data: netfilter.Uint32Bytes(nflogFlushTimeout)},
	} {
		if err := n.configure(a); err != nil {
			c.Close()
			return nil, err
		}
	}
	// The packet's conntrack entry needs a kernel built with
	// CONFIG_NETFILTER_NETLINK_GLUE_CT (most distributions' are) and
	// nf_conntrack_netlink; without them the kernel refuses the flag
	// (EOPNOTSUPP) and packets come without it.
	n.ct = n.configure(netfilter.Attribute{Type: nflogCfgFlags, Data: netfilter.Uint16Bytes(nflogFlagSeq | nflogFlagCT)}) == nil
	if !n.ct {
		if err := n.configure(netfilter.Attribute{Type: nflogCfgFlags, Data: netfilter.Uint16Bytes(nflogFlagSeq)}); err != nil {
			c.Close()
			return nil, err
		}
	}
	return n, nil
}

// Conntrack reports whether logged packets come with their conntrack entry.
func (n *NFLOG) Conntrack() bool { return n.ct }

// fixNFLOG is the fix for an NFLOG socket the kernel does not serve.
const fixNFLOG = "check that the nfnetlink_log kernel module is loaded (modprobe nfnetlink_log)"

func (n *NFLOG) configure(a netfilter.Attribute) error {
	msg, err := netfilter.MarshalNetlink(netfilter.Header{
		SubsystemID: netfilter.NFSubsysULOG, MessageType: nflogMsgConfig,
		Family: netfilter.ProtoUnspec, ResourceID: n.group,
		Flags: netlink.Request | netlink.Acknowledge,
	}, []netfilter.Attribute{a})
	if err != nil {
		return err
	}
	if _, err := n.conn.Query(msg); err != nil {
		// The kernel answers EPERM when another socket holds the group (and
		// when the caller lacks CAP_NET_ADMIN, which conntrack needed too).
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("denied.nflog_group: cannot bind NFLOG group %d in %s: %w (got %d); another process (ulogd, another collector) already listens on that group there, or the collector lacks CAP_NET_ADMIN: stop the other listener, or log the CNI's dropped packets to a group of their own", n.group, n.where(), err, n.group)
		}
		return netlinkError(n.ns, fmt.Sprintf("cannot subscribe to NFLOG group %d", n.group), err, fixNFLOG)
	}
	return nil
}

func (n *NFLOG) where() string {
	if n.ns.Path() == "" {
		return "the collector's own namespace"
	}
	return strconv.Quote(n.ns.Path())
}

// Receive reads one batch of logged packets and hands each to fn. It returns
// the socket's error (ENOBUFS: the kernel dropped packets the socket had no
// room for; the socket stays usable). Messages that are not packets of the
// group are skipped.
func (n *NFLOG) Receive(fn func(*LoggedPacket)) error {
	msgs, err := n.conn.Receive()
	if err != nil {
		return err
	}
	var p LoggedPacket
	for _, m := range msgs {
		if n.parse(m, &p) {
			fn(&p)
		}
	}
	return nil
}

// parse reads one message into p; false: not a well-formed packet of the
// group.
func (n *NFLOG) parse(m netlink.Message, p *LoggedPacket) bool {
	h, ad, err := netfilter.DecodeNetlink(m)
	if err != nil || h.SubsystemID != netfilter.NFSubsysULOG || h.MessageType != nflogMsgPacket || h.ResourceID != n.group {
		return false
	}
	*p = LoggedPacket{}
	for ad.Next() {
		switch ad.Type() {
		case nflogAttrPacketHdr:
			if b := ad.Bytes(); len(b) >= 2 {
				p.HWProtocol = binary.BigEndian.Uint16(b)
			}
		case nflogAttrPayload:
			p.Payload = ad.Bytes()
		case nflogAttrPrefix:
			b := ad.Bytes()
			for len(b) > 0 && b[len(b)-1] == 0 {
				b = b[:len(b)-1]
			}
			p.Prefix = b
		case nflogAttrSeq:
			p.Seq, p.HasSeq = ad.Uint32(), true
		case nflogAttrCT:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				p.CT, p.HasCT = loggedConntrack(nad), true
				return nil
			})
		}
	}
	return ad.Err() == nil
}

// loggedConntrack reads the conntrack entry of a logged packet: the original
// destination (pre-DNAT: the reply tuple already holds the translation), zone,
// mark and labels.
func loggedConntrack(ad *netlink.AttributeDecoder) deny.Conntrack {
	var ct deny.Conntrack
	for ad.Next() {
		switch ad.Type() {
		case ctaTupleOrig:
			ad.Nested(func(t *netlink.AttributeDecoder) error {
				ct.OrigDst, ct.OrigDstPort = tupleDestination(t)
				return nil
			})
		case ctaMark:
			ct.Mark = ad.Uint32()
		case ctaZone:
			ct.Zone = ad.Uint16()
		case ctaLabels:
			ct.Labels = labels(ad.Bytes())
		}
	}
	return ct
}

// tupleDestination is a ctnetlink tuple's destination address and port.
func tupleDestination(ad *netlink.AttributeDecoder) (addr netip.Addr, port uint16) {
	for ad.Next() {
		switch ad.Type() {
		case ctaTupleIP:
			ad.Nested(func(ip *netlink.AttributeDecoder) error {
				for ip.Next() {
					if t := ip.Type(); t == ctaIPv4Dst || t == ctaIPv6Dst {
						addr, _ = netip.AddrFromSlice(ip.Bytes())
					}
				}
				return nil
			})
		case ctaTupleProto:
			ad.Nested(func(pr *netlink.AttributeDecoder) error {
				for pr.Next() {
					if pr.Type() == ctaProtoDstPort {
						port = pr.Uint16()
					}
				}
				return nil
			})
		}
	}
	return addr, port
}

// Close closes the socket, which also releases the group; a Receive blocked
// on it returns.
func (n *NFLOG) Close() error { return n.conn.Close() }
