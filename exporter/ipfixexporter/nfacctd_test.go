//go:build integration

package ipfixexporter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

// nfacctdPort is where nfacctd listens (UDP: pmacct's IPFIX collector does not
// accept TCP) inside its namespace.
const nfacctdPort = 14742

// nfacctdPrimitives declares Antrea IEs to pmacct, which knows nothing of
// enterprise 56506 on its own: strings are variable length, numbers fixed.
const nfacctdPrimitives = `name=src_pod_name field_type=56506:101 len=vlen semantics=str
name=src_pod_ns field_type=56506:100 len=vlen semantics=str
name=dst_pod_name field_type=56506:103 len=vlen semantics=str
name=dst_svc_port field_type=56506:108 len=2 semantics=u_int
name=dst_svc_port_name field_type=56506:109 len=vlen semantics=str
name=flow_type field_type=56506:137 len=1 semantics=u_int
name=tcp_state field_type=56506:136 len=vlen semantics=str
name=egress_ip field_type=56506:154 len=vlen semantics=str
name=proxy_snat_ip field_type=56506:170 len=4 semantics=ip
name=octets_from_src_node field_type=56506:123 len=8 semantics=u_int
name=end_secs_from_src_node field_type=56506:151 len=4 semantics=u_int
`

// nfacctdAggregate is the print plugin's key: IANA primitives pmacct decodes
// itself, plus the Antrea ones declared above.
const nfacctdAggregate = "src_host, dst_host, src_port, dst_port, proto, timestamp_start, timestamp_end, " +
	"src_pod_name, src_pod_ns, dst_pod_name, dst_svc_port, dst_svc_port_name, flow_type, tcp_state, egress_ip, " +
	"proxy_snat_ip, octets_from_src_node, end_secs_from_src_node"

type nfacctd struct {
	ns     *ipfixcollector.Netns
	cmd    *exec.Cmd
	out    string
	exited chan struct{}
	log    *logLines
}

func startNfacctd(t *testing.T) *nfacctd {
	t.Helper()
	if _, err := exec.LookPath("nfacctd"); err != nil {
		t.Fatal("nfacctd is not installed (apt package pmacct)")
	}
	dir := t.TempDir()
	n := &nfacctd{ns: ipfixcollector.NewNetns(t), out: filepath.Join(dir, "flows.json"), exited: make(chan struct{}), log: &logLines{}}
	prim := filepath.Join(dir, "primitives.lst")
	conf := filepath.Join(dir, "nfacctd.conf")
	files := map[string]string{
		prim: nfacctdPrimitives,
		conf: fmt.Sprintf(`daemonize: false
nfacctd_ip: 127.0.0.1
nfacctd_port: %d
aggregate_primitives: %s
timestamps_since_epoch: true
plugins: print[out]
aggregate[out]: %s
print_output[out]: json
print_output_file[out]: %s
print_output_file_append[out]: true
print_refresh_time[out]: 1
`, nfacctdPort, prim, nfacctdAggregate, n.out),
	}
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n.cmd = n.ns.Command("nfacctd", "-f", conf)
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); close(n.exited) }()
	// nfacctd ignores SIGTERM; SIGINT stops it in a few seconds.
	t.Cleanup(func() {
		_ = n.cmd.Process.Signal(os.Interrupt)
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Ready when it listens and its print plugin has run once: datagrams
		// read before the plugin is up are lost, and with them the templates,
		// which a UDP exporter resends only every template_refresh_interval.
		out, _ := n.ns.Exec("ss", "-Hlun", fmt.Sprintf("sport = :%d", nfacctdPort))
		if strings.Contains(out, fmt.Sprintf(":%d", nfacctdPort)) && strings.Contains(n.log.String(), "Purging cache - END") {
			return n
		}
		select {
		case <-n.exited:
			t.Fatalf("nfacctd exited: %s", n.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nfacctd not listening after 20s: %s", n.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFlows waits until the print plugin wrote at least n JSON lines.
func (n *nfacctd) waitFlows(t *testing.T, want int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var flows []map[string]any
		b, _ := os.ReadFile(n.out)
		s := bufio.NewScanner(bytes.NewReader(b))
		for s.Scan() {
			var m map[string]any
			if err := json.Unmarshal(s.Bytes(), &m); err == nil {
				flows = append(flows, m)
			}
		}
		if len(flows) >= want {
			return flows
		}
		if time.Now().After(deadline) {
			t.Fatalf("nfacctd wrote %d flows after 20s, want %d; output:\n%s\nlog:\n%s", len(flows), want, b, n.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestNfacctdDecodesAntreaIEs: pmacct's nfacctd, an IPFIX collector nobody
// here wrote, decodes our UDP stream: the IANA 5-tuple and timestamps by
// itself, and Antrea's enterprise IEs through an aggregate_primitives file.
func TestNfacctdDecodesAntreaIEs(t *testing.T) {
	n := startNfacctd(t)
	cfg := testConfig(fmt.Sprintf("127.0.0.1:%d", nfacctdPort), TransportUDP, layout.Aggregate)
	e, _ := testExporter(t, cfg, nsDialer(n.ns))
	recs := recordsWithPorts(7000, 3)
	recs[1].Source.PodName = "client-1"
	recs[1].FlowType = 3
	recs[2].Service.PortName = "default/web:http"
	recs[2].TCPState = "TIME_WAIT"
	if err := e.pushLogs(context.Background(), logsOf(recs...)); err != nil {
		t.Fatal(err)
	}
	flows := n.waitFlows(t, len(recs))
	byPort := map[float64]map[string]any{}
	for _, f := range flows {
		if p, ok := f["port_src"].(float64); ok {
			byPort[p] = f
		}
	}
	for _, r := range recs {
		f := byPort[float64(r.Source.Port)]
		if f == nil {
			t.Fatalf("nfacctd has no flow with port_src %d: %v", r.Source.Port, flows)
		}
		want := map[string]any{
			"ip_src": r.Source.Address.String(), "ip_dst": r.Destination.Address.String(),
			"port_dst": float64(r.Destination.Port), "ip_proto": "tcp",
			"timestamp_start": fmt.Sprintf("%d.000000", r.Start.Unix()), "timestamp_end": fmt.Sprintf("%d.000000", r.End.Unix()),
			"packets": float64(r.Stats.PacketDelta), "bytes": float64(r.Stats.OctetDelta),
			"src_pod_name": r.Source.PodName, "src_pod_ns": r.Source.Namespace, "dst_pod_name": r.Destination.PodName,
			// pmacct prints custom integer primitives as JSON strings.
			"dst_svc_port": fmt.Sprint(r.Service.Port), "dst_svc_port_name": r.Service.PortName,
			"flow_type": fmt.Sprint(uint8(r.FlowType)), "tcp_state": r.TCPState, "egress_ip": r.Egress.Address.String(),
			"proxy_snat_ip":          r.ProxySNATAddress.String(),
			"octets_from_src_node":   fmt.Sprint(r.Aggregation.StatsFromSource.OctetDelta),
			"end_secs_from_src_node": fmt.Sprint(r.Aggregation.EndFromSource.Unix()),
		}
		for k, v := range want {
			if f[k] != v {
				t.Errorf("port %d: nfacctd %s = %v (%T), want %v", r.Source.Port, k, f[k], f[k], v)
			}
		}
	}
}
