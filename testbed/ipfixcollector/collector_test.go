//go:build integration

package ipfixcollector

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// messages builds IPFIX messages by hand (RFC 7011), independent of go-ipfix:
// one announcing template 256 (sourceIPv4Address, sourceTransportPort and
// Antrea's sourcePodName: enterprise 56506, IE 101, variable length), then one
// data set with a record per port. go-ipfix's collector reads one set per
// message, as exporters send them.
func messages(domain uint32, ports ...uint16) [][]byte {
	be := binary.BigEndian
	tmpl := be.AppendUint16(nil, 256)
	tmpl = be.AppendUint16(tmpl, 3)
	tmpl = be.AppendUint16(be.AppendUint16(tmpl, 8), 4)
	tmpl = be.AppendUint16(be.AppendUint16(tmpl, 7), 2)
	tmpl = be.AppendUint32(be.AppendUint16(be.AppendUint16(tmpl, 0x8000|101), 0xffff), 56506)
	var data []byte
	for _, p := range ports {
		data = append(data, 10, 0, 0, 7)
		data = be.AppendUint16(data, p)
		data = append(data, 3, 'w', 'e', 'b')
	}
	msg := func(setID uint16, set []byte, seq uint32) []byte {
		b := be.AppendUint16(nil, 10)
		b = be.AppendUint16(b, uint16(16+4+len(set)))
		b = be.AppendUint32(b, uint32(time.Now().Unix()))
		b = be.AppendUint32(b, seq)
		b = be.AppendUint32(b, domain)
		b = be.AppendUint16(be.AppendUint16(b, setID), uint16(4+len(set)))
		return append(b, set...)
	}
	return [][]byte{msg(2, tmpl, 0), msg(256, data, 0)}
}

func send(t *testing.T, c *Collector, network string, msgs [][]byte) {
	t.Helper()
	conn, err := c.Netns().DialContext(context.Background(), network, c.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, m := range msgs {
		if _, err := conn.Write(m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCollectorDecodesOverTCPAndUDP: a hand-built message reaches the real
// collector over each transport and comes back from its API, field by field.
func TestCollectorDecodesOverTCPAndUDP(t *testing.T) {
	for _, transport := range []string{"tcp", "udp"} {
		t.Run(transport, func(t *testing.T) {
			c := Start(t, Options{Transport: transport})
			send(t, c, transport, messages(42, 1000, 1001))
			recs := c.WaitRecords(t, 2, 10*time.Second)
			if len(recs) != 2 {
				t.Fatalf("%d records, want 2", len(recs))
			}
			for i, r := range recs {
				if r.ObsDomainID != 42 || r.TemplateID != 256 {
					t.Errorf("record %d: domain %d template %d, want 42 and 256", i, r.ObsDomainID, r.TemplateID)
				}
				want := []string{"sourceIPv4Address", "sourceTransportPort", "sourcePodName"}
				if len(r.Names) != 3 || r.Names[0] != want[0] || r.Names[1] != want[1] || r.Names[2] != want[2] {
					t.Errorf("record %d: IEs %v, want %v", i, r.Names, want)
				}
				if r.Fields["sourceIPv4Address"] != "10.0.0.7" || r.Fields["sourcePodName"] != "web" {
					t.Errorf("record %d: fields %v", i, r.Fields)
				}
			}
			if recs[0].Fields["sourceTransportPort"] != "1000" || recs[1].Fields["sourceTransportPort"] != "1001" {
				t.Errorf("ports %s, %s, want 1000, 1001", recs[0].Fields["sourceTransportPort"], recs[1].Fields["sourceTransportPort"])
			}
		})
	}
}

// TestRestartEmptiesTheStore: after Stop the API is gone and connections are
// refused; Restart serves again with no records.
func TestRestartEmptiesTheStore(t *testing.T) {
	c := Start(t, Options{})
	send(t, c, "tcp", messages(1, 7))
	c.WaitRecords(t, 1, 10*time.Second)
	c.Stop()
	if _, err := c.Records(); err == nil {
		t.Fatal("API answers after Stop")
	}
	if conn, err := c.Netns().DialContext(context.Background(), "tcp", c.Endpoint()); err == nil {
		conn.Close()
		t.Fatal("IPFIX port accepts connections after Stop")
	}
	c.Restart(t)
	if recs, err := c.Records(); err != nil || len(recs) != 0 {
		t.Fatalf("after Restart: %d records, err %v; want none", len(recs), err)
	}
	send(t, c, "tcp", messages(1, 8))
	if r := c.WaitRecords(t, 1, 10*time.Second); r[0].Fields["sourceTransportPort"] != "8" {
		t.Fatalf("after Restart: %v", r[0].Fields)
	}
}

// TestSharedNamespace: a collector started in a namespace the caller owns is
// reachable there.
func TestSharedNamespace(t *testing.T) {
	ns := NewNetns(t)
	c := Start(t, Options{Netns: ns, Port: 9995})
	if c.Netns() != ns || c.Endpoint() != "127.0.0.1:9995" {
		t.Fatalf("netns %v endpoint %s", c.Netns(), c.Endpoint())
	}
	if _, err := ns.Exec("ss", "-ltn", "sport", "= :9995"); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:9995"); return err })
	if err == nil {
		ln.Close()
		t.Fatal("port 9995 is free in the namespace: the collector is not there")
	}
}
