package ctsource

import (
	"net"
	"net/netip"
)

// LocalAddrs returns the addresses configured on the namespace's interfaces
// (loopback included): a connection whose original source is one of them was
// opened by this host (decision D2).
func LocalAddrs(ns *Namespace) (map[netip.Addr]struct{}, error) {
	out := make(map[netip.Addr]struct{})
	err := ns.Do(func() error {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if p, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(p.IP); ok {
					out[ip.Unmap()] = struct{}{}
				}
			}
		}
		return nil
	})
	return out, err
}
