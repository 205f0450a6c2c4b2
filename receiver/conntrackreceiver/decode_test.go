//go:build integration

package conntrackreceiver

import (
	"fmt"
	"maps"
	"os/exec"
	"testing"
	"time"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
	"github.com/flowtel/flowtel/testbed/peer"
)

// TestDumpDecodesAsTheLibrary: on a real table (TCP and UDP through a
// ClusterIP, DNAT and masquerade, both families, pings, counters, start
// times, a connmark, a second zone and SCTP entries), each entry the dump
// decoder hands over is what ti-mo/conntrack's decoder and Convert make of
// it.
func TestDumpDecodesAsTheLibrary(t *testing.T) {
	l := newLab(t)
	l.track()
	l.kubeProxy()
	l.both("-t", "mangle", "-A", "PREROUTING", "-p", "tcp", "-j", "CONNMARK", "--set-mark", "0x42")
	l.both("-t", "raw", "-A", "PREROUTING", "-p", "udp", "--dport", "5400", "-j", "CT", "--zone", "7")
	node := l.path(l.node)
	createEntries(t, node,
		entry{proto: 132, src: "10.201.1.2:3868", dst: "10.201.2.2:3868", zone: 7},
		entry{proto: 6, src: "10.201.1.2:4000", dst: "10.201.2.2:80", mark: 0x9},
	)
	bin := peer.Build(t)
	for _, ip := range []string{srvV4, srvV6} {
		if out, err := exec.Command("ip", "netns", "exec", l.cli, bin, "ping", "-to", ip, "-id", "77", "-count", "2", "-size", "16").CombinedOutput(); err != nil {
			t.Fatalf("ping %s: %v\n%s", ip, err, out)
		}
	}
	for _, c := range []struct{ cluster, srv string }{{clusterIPV4, srvV4}, {clusterIPV6, srvV6}} {
		ln := l.listenTCP(l.srv, hostPort(c.srv, "8080"))
		go func() {
			if s, err := ln.Accept(); err == nil {
				_, _ = s.Write([]byte("hello"))
			}
		}()
		if _, err := l.dialTCP(l.cli, hostPort(c.cluster, "80")).Write([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		l.listenUDP(l.srv, hostPort(c.srv, "5353"))
		l.listenUDP(l.srv, hostPort(c.srv, "5400"))
		for _, dst := range []string{hostPort(c.cluster, "53"), hostPort(c.srv, "5400")} {
			if _, err := l.dialUDP(l.cli, dst).Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
		}
	}

	ns, err := ctsource.OpenNamespace(node)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	src, err := ctsource.Dial(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// The connections' last packets (a FIN when a socket the test let go is
	// closed, a delayed ACK) change entries while the table is read: compare
	// only a table that did not change while the dump decoder read it, by
	// the library's dumps before and after.
	libraryDump := func() map[string]store.Conn {
		flows, err := dumpAll(ns) // the library's dump, every zone
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]store.Conn{}
		for i := range flows {
			var c store.Conn
			ctsource.Convert(&flows[i], &c)
			out[fmt.Sprint(c.Key, c.Zone)] = c
		}
		return out
	}
	var dumped []store.Conn
	var want map[string]store.Conn
	for attempt := 0; ; attempt++ {
		before := libraryDump()
		dumped = dumped[:0]
		for _, zone := range []uint16{0, 7} {
			if _, err := src.DumpZone(zone, func(c *store.Conn) { dumped = append(dumped, *c) }); err != nil {
				t.Fatal(err)
			}
		}
		if want = libraryDump(); maps.Equal(before, want) {
			break
		}
		if attempt == 20 {
			t.Fatal("the table kept changing for 20 rounds of dumps")
		}
		time.Sleep(250 * time.Millisecond)
	}
	kinds := map[string]bool{}
	for _, c := range dumped {
		w, ok := want[fmt.Sprint(c.Key, c.Zone)]
		switch {
		case !ok:
			t.Errorf("dumped %+v, not in the library's dump", c)
		case c != w:
			t.Errorf("dumped\n%+v\nthe library\n%+v", c, w)
		}
		kinds["v6"] = kinds["v6"] || c.Src.Is6()
		kinds["icmp"] = kinds["icmp"] || c.IsICMP()
		kinds["tcp state"] = kinds["tcp state"] || c.TCPState != 0
		kinds["snat"] = kinds["snat"] || c.SNATAddr.IsValid()
		kinds["dnat"] = kinds["dnat"] || c.OrigDst != c.Dst
		kinds["counters"] = kinds["counters"] || c.Reply.Bytes > 0
		kinds["start"] = kinds["start"] || c.Start > 0
		kinds["mark"] = kinds["mark"] || c.Mark == 0x42
		kinds["zone"] = kinds["zone"] || c.Zone == 7
		kinds["sctp"] = kinds["sctp"] || c.Proto == 132
	}
	if len(dumped) != len(want) {
		t.Errorf("dumped %d entries, the library %d", len(dumped), len(want))
	}
	for _, k := range []string{"v6", "icmp", "tcp state", "snat", "dnat", "counters", "start", "mark", "zone", "sctp"} {
		if !kinds[k] {
			t.Errorf("no entry with %s in the table (%d entries)", k, len(want))
		}
	}
}
