package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// ping sends echo requests with a chosen identifier over a raw ICMP or ICMPv6
// socket, as `ping -e id` does, and waits for each reply, so that tests can run
// concurrent conversations between the same hosts and know their counters.
func ping(args []string) error {
	fs := flag.NewFlagSet("ping", flag.ExitOnError)
	to := fs.String("to", "", "destination address")
	id := fs.Uint("id", 1, "echo identifier")
	count := fs.Int("count", 3, "echo requests to send")
	size := fs.Int("size", 56, "payload bytes of each request")
	interval := fs.Duration("interval", 100*time.Millisecond, "pause between requests")
	_ = fs.Parse(args)

	dst, err := netip.ParseAddr(*to)
	if err != nil {
		return fmt.Errorf("-to: %w", err)
	}
	e := echo{v6: dst.Unmap().Is6(), id: uint16(*id), size: *size, dst: &net.IPAddr{IP: dst.AsSlice()}}
	network := "ip4:icmp"
	if e.v6 {
		network = "ip6:ipv6-icmp"
	}
	if e.c, err = net.ListenPacket(network, ""); err != nil {
		return err
	}
	defer e.c.Close()
	for seq := range *count {
		if err := e.once(uint16(seq)); err != nil {
			return err
		}
		time.Sleep(*interval)
	}
	fmt.Println("replies", *count)
	return nil
}

type echo struct {
	c    net.PacketConn
	dst  net.Addr
	v6   bool
	id   uint16
	size int
}

// once sends request seq and waits for its reply. Every raw ICMP socket of the
// namespace receives every reply: those of other identifiers are skipped.
func (e *echo) once(seq uint16) error {
	msg := make([]byte, 8+e.size)
	request, reply := byte(8), byte(0)
	if e.v6 {
		request, reply = 128, 129 // the kernel computes ICMPv6 checksums
	}
	msg[0] = request
	binary.BigEndian.PutUint16(msg[4:], e.id)
	binary.BigEndian.PutUint16(msg[6:], seq)
	if !e.v6 {
		binary.BigEndian.PutUint16(msg[2:], checksum(msg))
	}
	if _, err := e.c.WriteTo(msg, e.dst); err != nil {
		return err
	}
	buf := make([]byte, 1500)
	_ = e.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		n, _, err := e.c.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("echo id %d seq %d: %w", e.id, seq, err)
		}
		if n >= 8 && buf[0] == reply && binary.BigEndian.Uint16(buf[4:]) == e.id && binary.BigEndian.Uint16(buf[6:]) == seq {
			return nil
		}
	}
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
