//go:build integration

package ipfixexporter

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/go-ipfix/pkg/entities"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

// capture is a running tshark writing what it sees on a namespace's loopback
// to a pcap file.
type capture struct {
	cmd    *exec.Cmd
	file   string
	exited chan struct{}
	stderr *logLines
	// headerSize is the file's size before the first packet.
	headerSize int64
}

// logLines collects a process's output while the test reads it.
type logLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// probePort is where startCapture sends UDP probes (the discard port: nothing
// listens, the datagrams go nowhere) to see that the capture has begun.
const probePort = 9

// startCapture starts tshark on lo in ns with a capture filter for
// "<proto> port <port>" and returns once it has captured a probe: tshark says
// "Capturing on" before the kernel filter is in place, and packets sent in
// between would be missed.
func startCapture(t *testing.T, ns *ipfixcollector.Netns, proto string, port int) *capture {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Fatal("tshark is not installed (apt package tshark)")
	}
	c := &capture{file: filepath.Join(t.TempDir(), "ipfix.pcapng"), exited: make(chan struct{}), stderr: &logLines{}}
	filter := fmt.Sprintf("%s port %d or udp port %d", proto, port, probePort)
	c.cmd = ns.Command("tshark", "-i", "lo", "-f", filter, "-w", c.file)
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); <-c.exited })

	probe, err := ns.DialContext(context.Background(), "udp", fmt.Sprintf("127.0.0.1:%d", probePort))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The file holds its header once tshark started; it grows by the first packet.
		if strings.Contains(c.stderr.String(), "Capture started") {
			if fi, err := os.Stat(c.file); err == nil {
				if c.headerSize == 0 {
					c.headerSize = fi.Size()
				} else if fi.Size() > c.headerSize {
					return c
				}
			}
			_, _ = probe.Write([]byte("probe"))
		}
		select {
		case <-c.exited:
			t.Fatalf("tshark exited: %s", c.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("tshark captured no probe within 30s: %s", c.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the capture and returns the file's path. tshark's capture
// process writes what the kernel handed it in batches and may not drain the
// kernel's buffer on SIGINT, so first a last probe is sent and stop waits until
// the file holds it: every packet sent before it is then in the file too.
func (c *capture) stop(t *testing.T, ns *ipfixcollector.Netns) string {
	t.Helper()
	probe, err := ns.DialContext(context.Background(), "udp", fmt.Sprintf("127.0.0.1:%d", probePort))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if _, err := probe.Write([]byte("last-probe")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		// A file being written reads up to its last complete packet.
		out, _ := exec.Command("tshark", "-r", c.file, "-Y", "udp contains \"last-probe\"", "-T", "fields", "-e", "frame.number").Output()
		if strings.TrimSpace(string(out)) != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the capture does not hold the last probe after 30s: %s", c.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("tshark did not stop on SIGINT")
	}
	return c.file
}

// tshark reads a capture file, decoding port as IPFIX (cflow), with args.
func tshark(t *testing.T, file, proto string, port int, args ...string) string {
	t.Helper()
	all := append([]string{"-r", file, "-d", proto + ".port==" + strconv.Itoa(port) + ",cflow"}, args...)
	out, err := exec.Command("tshark", all...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("tshark %s: %v: %s", strings.Join(all, " "), err, stderr)
	}
	return string(out)
}

// tsharkMaxFields raises tshark's limit of 60 fields per template (beyond it
// tshark ignores the template); the aggregate layout has 70 IEs, 79 with UIDs.
const tsharkMaxFields = "cflow.max_template_fields:128"

// tsField is one field specifier of a template as tshark shows it.
type tsField struct {
	typ string // tshark's "Type:" text, e.g. "flowEndReason (136)", "101 [pen: Project Antrea]"
	id  uint16
	pen uint32
}

// tsFlow is one data record as tshark shows it: its "label: value" lines in order.
type tsFlow struct {
	templateID uint16
	lines      []string
}

// value returns the value of the n-th (from 0) line labelled label.
func (f tsFlow) value(label string, n int) (string, bool) {
	for _, l := range f.lines {
		if v, ok := strings.CutPrefix(l, label+": "); ok {
			if n == 0 {
				return v, true
			}
			n--
		}
	}
	return "", false
}

var (
	reTemplate = regexp.MustCompile(`^Template \(Id = (\d+), Count = \d+\)$`)
	reField    = regexp.MustCompile(`^Field \(\d+/\d+\): `)
	reType     = regexp.MustCompile(`= Type: ((?:\S+ )?\(?(\d+)\)?.*)$`)
	rePEN      = regexp.MustCompile(`^PEN: .*\((\d+)\)$`)
	reDataSet  = regexp.MustCompile(`^Set \d+ \[id=(\d+)\] \(\d+ flows\)$`)
	reFlow     = regexp.MustCompile(`^Flow \d+$`)
)

// parseTsharkV reads tshark -V output: the templates' fields and the flows.
func parseTsharkV(out string) (map[uint16][]tsField, []tsFlow) {
	templates := map[uint16][]tsField{}
	var flows []tsFlow
	var tmpl uint16 // template being listed, 0 outside one
	var set uint16  // data set being listed
	flowIndent := -1
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimSpace(raw)
		indent := len(raw) - len(strings.TrimLeft(raw, " "))
		if flowIndent >= 0 && indent > flowIndent && line != "" {
			f := &flows[len(flows)-1]
			f.lines = append(f.lines, line)
			continue
		}
		flowIndent = -1
		switch {
		case strings.HasPrefix(raw, "Frame ") || strings.HasPrefix(line, "Set "):
			tmpl, set = 0, 0
			if m := reDataSet.FindStringSubmatch(line); m != nil {
				set = uint16(atoi(m[1]))
			}
		case reTemplate.MatchString(line):
			tmpl = uint16(atoi(reTemplate.FindStringSubmatch(line)[1]))
		case tmpl != 0 && reField.MatchString(line):
			templates[tmpl] = append(templates[tmpl], tsField{})
		case tmpl != 0 && reType.MatchString(line) && len(templates[tmpl]) > 0:
			m := reType.FindStringSubmatch(line)
			f := &templates[tmpl][len(templates[tmpl])-1]
			f.typ, f.id = m[1], uint16(atoi(m[2]))
		case tmpl != 0 && rePEN.MatchString(line) && len(templates[tmpl]) > 0:
			templates[tmpl][len(templates[tmpl])-1].pen = uint32(atoi(rePEN.FindStringSubmatch(line)[1]))
		case set != 0 && reFlow.MatchString(line):
			flows = append(flows, tsFlow{templateID: set})
			flowIndent = indent
		}
	}
	return templates, flows
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// antreaHex is how tshark prints an enterprise IE's value: hex bytes, a
// string's length prefix left out.
func antreaHex(b []byte) string {
	parts := make([]string, len(b))
	for i, c := range b {
		parts[i] = fmt.Sprintf("%02x", c)
	}
	return strings.Join(parts, " ")
}

// TestTsharkDecodesCapture: tshark (Wireshark's dissector, written by nobody
// here) decodes a capture of our TCP stream. Its view of both templates has
// our IEs in order with their IANA ids and enterprise numbers (IANA names for
// the IEs tshark names after IANA), and each data record shows, under tshark's
// own labels, the values we sent; the Antrea (56506) IEs are present with our
// bytes.
func TestTsharkDecodesCapture(t *testing.T) {
	col := startCollector(t, TransportTCP, nil)
	cp := startCapture(t, col.Netns(), "tcp", collectorPort)
	cfg := testConfig(col.Endpoint(), TransportTCP, layout.Aggregate)
	e, _ := testExporter(t, cfg, nsDialer(col.Netns()))
	recs := append(recordsWithPorts(6000, 3), fullRecord(true))
	recs[3].Source.Port = 6100
	recs[1].EndReason = flowrecord.EndReasonEndOfFlow
	recs[2].Stats.OctetDelta = 987654321
	if err := e.pushLogs(context.Background(), logsOf(recs...)); err != nil {
		t.Fatal(err)
	}
	waitRecords(t, col, len(recs)) // on the wire and read by the collector
	file := cp.stop(t, col.Netns())
	out := tshark(t, file, "tcp", collectorPort, "-o", tsharkMaxFields, "-V")
	templates, flows := parseTsharkV(out)

	v4, v6, err := layout.New(cfg.layoutOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range []*layout.Template{v4, v6} {
		got := templates[tmpl.ID]
		want := tmpl.Elements()
		if len(got) != len(want) {
			t.Fatalf("tshark shows template %d with %d fields, want %d", tmpl.ID, len(got), len(want))
		}
		for i, ie := range want {
			g := got[i]
			pen := ie.EnterpriseId
			if g.id != ie.ElementId || g.pen != pen {
				t.Errorf("template %d field %d (%s): tshark shows id %d pen %d (%q), want id %d pen %d",
					tmpl.ID, i+1, ie.Name, g.id, g.pen, g.typ, ie.ElementId, pen)
			}
			// tshark names IEs from 128 up after IANA; below, after NetFlow v9.
			if pen == 0 && ie.ElementId >= 128 && !strings.HasPrefix(g.typ, ie.Name+" ") {
				t.Errorf("template %d field %d: tshark names it %q, want IANA's %s", tmpl.ID, i+1, g.typ, ie.Name)
			}
		}
	}

	if len(flows) != len(recs) {
		t.Fatalf("tshark decoded %d flows, want %d", len(flows), len(recs))
	}
	byPort := map[string]tsFlow{}
	for _, f := range flows {
		p, _ := f.value("SrcPort", 0)
		byPort[p] = f
	}
	for _, r := range recs {
		f, ok := byPort[strconv.Itoa(int(r.Source.Port))]
		if !ok {
			t.Fatalf("no flow with SrcPort %d in tshark's decoding", r.Source.Port)
		}
		wantTemplate := layout.TemplateIDv4
		if r.IsIPv6() {
			wantTemplate = layout.TemplateIDv6
		}
		if f.templateID != wantTemplate {
			t.Errorf("port %d: data set %d, want %d", r.Source.Port, f.templateID, wantTemplate)
		}
		const utc = "Jan _2, 2006 15:04:05.000000000 UTC"
		// IANA IE -> tshark's label and occurrence (forward before reverse) -> value.
		want := []struct {
			ie, label string
			n         int
			value     string
		}{
			{"flowStartSeconds", "StartTime", 0, r.Start.UTC().Format(utc)},
			{"flowEndSeconds", "EndTime", 0, r.End.UTC().Format(utc)},
			{"flowEndReason", "Flow End Reason", 0, fmt.Sprintf("(%d)", r.EndReason)},
			{"sourceIPv4Address/sourceIPv6Address", "SrcAddr", 0, r.Source.Address.String()},
			{"destinationIPv4Address/destinationIPv6Address", "DstAddr", 0, r.Destination.Address.String()},
			{"sourceTransportPort", "SrcPort", 0, strconv.Itoa(int(r.Source.Port))},
			{"destinationTransportPort", "DstPort", 0, strconv.Itoa(int(r.Destination.Port))},
			{"protocolIdentifier", "Protocol", 0, "TCP (6)"},
			{"packetTotalCount", "Permanent Packets", 0, fmt.Sprint(r.Stats.PacketTotal)},
			{"octetTotalCount", "Permanent Octets", 0, fmt.Sprint(r.Stats.OctetTotal)},
			{"packetDeltaCount", "Packets", 0, fmt.Sprint(r.Stats.PacketDelta)},
			{"octetDeltaCount", "Octets", 0, fmt.Sprint(r.Stats.OctetDelta)},
			{"reverseOctetTotalCount", "Permanent Octets", 1, fmt.Sprintf("%d (Reverse Type 85 BYTES_TOTAL)", r.ReverseStats.OctetTotal)},
			{"reverseOctetDeltaCount", "Octets", 1, fmt.Sprintf("%d (Reverse Type 1 BYTES)", r.ReverseStats.OctetDelta)},
		}
		for _, w := range want {
			got, _ := f.value(w.label, w.n)
			if got != w.value && !(strings.HasPrefix(w.value, "(") && strings.HasSuffix(got, " "+w.value)) {
				t.Errorf("port %d: %s: tshark shows %s: %q, want %q", r.Source.Port, w.ie, w.label, got, w.value)
			}
		}
		// Antrea's IEs: all present in template order (tshark leaves out
		// zero-length values: empty strings), and these with our bytes.
		var gotIDs, wantIDs []string
		for _, l := range f.lines {
			if rest, ok := strings.CutPrefix(l, "Enterprise Private entry: (Project Antrea) Type "); ok {
				id, _, _ := strings.Cut(rest, ":")
				gotIDs = append(gotIDs, id)
			}
		}
		tmpl := v4
		if r.IsIPv6() {
			tmpl = v6
		}
		values := expected(r, testClusterUUID)
		for _, ie := range tmpl.Elements() {
			if ie.EnterpriseId == 56506 && !(ie.Len == entities.VariableLength && values[ie.Name] == "") {
				wantIDs = append(wantIDs, strconv.Itoa(int(ie.ElementId)))
			}
		}
		if strings.Join(gotIDs, ",") != strings.Join(wantIDs, ",") {
			t.Errorf("port %d: tshark shows Antrea (56506) IEs\n%v, want\n%v", r.Source.Port, gotIDs, wantIDs)
		}
		for _, w := range []struct {
			ie    string
			id    int
			bytes []byte
		}{
			{"sourcePodName", 101, []byte(r.Source.PodName)},
			{"destinationServicePortName", 109, []byte(r.Service.PortName)},
			{"flowType", 137, []byte{byte(r.FlowType)}},
			{"destinationServicePort", 108, []byte{byte(r.Service.Port >> 8), byte(r.Service.Port)}},
		} {
			label := fmt.Sprintf("Enterprise Private entry: (Project Antrea) Type %d", w.id)
			got, _ := f.value(label, 0)
			if want := "Value (hex bytes): " + antreaHex(w.bytes); got != want {
				t.Errorf("port %d: %s (56506/%d): tshark shows %q, want %q", r.Source.Port, w.ie, w.id, got, want)
			}
		}
	}
}
