package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// mapCommand draws who talks to whom: flows from the flow stream (default) or
// from ClickHouse's flows table (--clickhouse), as a Graphviz graph.
func mapCommand(kube *genericclioptions.ConfigFlags) *cobra.Command {
	cmd, conn, sc := streamCommand(kube, "map", "draw who talks to whom (flow stream or ClickHouse) as Graphviz DOT, SVG or PNG")
	fs := cmd.Flags()
	var ch clickhouseFlags
	ch.register(fs, "instead of the flow stream")
	since := fs.String("since", "1h", "flows that ended after this: a duration (1h, 24h, 7d) or an RFC 3339 time; through the flow stream, older than the gateway holds in memory is read from its flow history")
	group := fs.String("group", "workload", "what a node of the map is: workload (a Pod's owner, else the Pod) or pod")
	output := fs.StringP("output", "o", "-", "output file: .dot or .gv (Graphviz DOT), .svg, .png or .pdf (rendered with Graphviz's dot); - is DOT on stdout")
	return runs(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
		if *group != "workload" && *group != "pod" {
			return fmt.Errorf("--group: %q is not workload or pod", *group)
		}
		format, err := outputFormat(*output)
		if err != nil {
			return err
		}
		from, err := parseSince(*since, time.Now())
		if err != nil {
			return err
		}
		g := newGraph(*group == "workload")
		var title string
		if ch.url != "" {
			title = fmt.Sprintf("flows in %s.%s since %s", ch.database, ch.table, from.UTC().Format(time.RFC3339))
			err = clickhouseFlows(ctx, &ch, from, g.add)
		} else {
			title = "flow stream since " + from.UTC().Format(time.RFC3339)
			err = streamFlows(ctx, *conn, *sc, from, stderr, g.add)
		}
		if err != nil {
			return err
		}
		var dot bytes.Buffer
		if err := g.writeDOT(&dot, title); err != nil {
			return err
		}
		if *output == "-" {
			_, err := stdout.Write(dot.Bytes())
			return err
		}
		if err := render(ctx, dot.Bytes(), format, *output); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "flowctl: wrote %s (%d nodes, %d edges)\n", *output, len(g.vertices), len(g.edges))
		return nil
	})
}

// outputFormat is the Graphviz output format of a file name: "dot" for DOT.
func outputFormat(path string) (string, error) {
	if path == "-" {
		return "dot", nil
	}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".dot", ".gv":
		return "dot", nil
	case ".svg", ".png", ".pdf":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("-o: %q does not end in .dot, .gv, .svg, .png or .pdf", path)
	}
}

// render writes DOT as it is, or through Graphviz's dot in another format.
func render(ctx context.Context, dot []byte, format, path string) error {
	if format == "dot" {
		return os.WriteFile(path, dot, 0o644)
	}
	bin, err := exec.LookPath("dot")
	if err != nil {
		return fmt.Errorf("-o %s: Graphviz's dot is not installed (apt install graphviz); -o map.dot writes the graph without it", path)
	}
	cmd := exec.CommandContext(ctx, bin, "-T"+format, "-o", path)
	cmd.Stdin = bytes.NewReader(dot)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("dot -T%s: %w: %s", format, err, strings.TrimSpace(errOut.String()))
	}
	return nil
}

// streamFlows reads the flow stream's history since from (no follow) and hands
// each connection's flows, summed, to add.
func streamFlows(ctx context.Context, conn connFlags, sc scopeFlags, from time.Time, stderr io.Writer, add func(mapFlow)) error {
	sess, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer sess.conn.Close()
	req := &pb.GetFlowsRequest{Since: timestamppb.New(from)}
	if err := sc.apply(req, sess); err != nil {
		return err
	}
	// One mapFlow per connection: a connection is exported many times.
	type conn5 struct {
		src, dst         string
		sport, dport, pr uint32
	}
	conns := map[conn5]*mapFlow{}
	var order []conn5
	err = stream(ctx, sess, req, stderr, func(flows []*pb.Flow) error {
		for _, f := range flows {
			t := f.GetTransport()
			k := conn5{string(f.GetIp().GetSource()), string(f.GetIp().GetDestination()), t.GetSourcePort(), t.GetDestinationPort(), t.GetProtocolNumber()}
			m := conns[k]
			if m == nil {
				src, dst := streamEnds(f)
				m = &mapFlow{Src: src, Dst: dst, Connections: 1}
				conns[k] = m
				order = append(order, k)
			}
			m.Bytes += f.GetStats().GetOctetDeltaCount() + f.GetReverseStats().GetOctetDeltaCount()
			switch {
			case streamDenied(f.GetK8S()):
				m.Outcome = outcomeDenied
			case streamRefused(f) && m.Outcome == "":
				m.Outcome = outcomeRefused
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range order {
		add(*conns[k])
	}
	return nil
}

// streamEnds reads a Flow's two ends. The stream has no endpoint kind or
// workload: a named Pod is a Pod, else a named Node is that Node (flowtel
// names the Node of a host-network endpoint), else the address is external.
func streamEnds(f *pb.Flow) (src, dst flowEnd) {
	k := f.GetK8S()
	end := func(ip []byte, ns, pod, node string, d pb.EndpointDisclosure) flowEnd {
		e := flowEnd{Namespace: ns, Pod: pod, Node: node}
		if len(ip) > 0 {
			e.Address = net.IP(ip).String()
		}
		e.Redacted = d == pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW && pod == ""
		return e
	}
	return end(f.GetIp().GetSource(), k.GetSourcePodNamespace(), k.GetSourcePodName(), k.GetSourceNodeName(), k.GetSourceDisclosure()),
		end(f.GetIp().GetDestination(), k.GetDestinationPodNamespace(), k.GetDestinationPodName(), k.GetDestinationNodeName(), k.GetDestinationDisclosure())
}

// streamRefused: a TCP connection answered by a reset (SYN, RST), closed at once.
func streamRefused(f *pb.Flow) bool {
	return f.GetTransport().GetProtocolNumber() == 6 && f.GetTransport().GetTcp().GetStateName() == "CLOSE" &&
		f.GetEndReason() == pb.FlowEndReason_FLOW_END_REASON_END_OF_FLOW &&
		f.GetStats().GetPacketTotalCount() == 1 && f.GetReverseStats().GetPacketTotalCount() == 1
}

func streamDenied(k *pb.Kubernetes) bool {
	for _, a := range []pb.NetworkPolicyRuleAction{k.GetIngressNetworkPolicyRuleAction(), k.GetEgressNetworkPolicyRuleAction()} {
		if a == pb.NetworkPolicyRuleAction_NETWORK_POLICY_RULE_ACTION_DROP || a == pb.NetworkPolicyRuleAction_NETWORK_POLICY_RULE_ACTION_REJECT {
			return true
		}
	}
	return false
}

// mapQuery groups the flows table by the two ends of each connection and its
// outcome, refused and denied as the dashboards define them
// (docs/dashboards.md). It runs on every ClickHouse from 18.16, as the
// dashboards' queries do.
const mapQuery = `SELECT
    %[1]s,
    %[2]s,
    multiIf(ingressNetworkPolicyRuleAction IN (2, 3) OR egressNetworkPolicyRuleAction IN (2, 3), 'denied',
        protocolIdentifier = 6 AND tcpState = 'CLOSE' AND flowEndReason = 3 AND packetTotalCount = 1 AND reversePacketTotalCount = 1, 'refused',
        '') AS outcome,
    uniqExact(sourceIP, sourceTransportPort, destinationIP, destinationTransportPort, protocolIdentifier) AS connections,
    sum(octetDeltaCount + reverseOctetDeltaCount) AS bytes
FROM %[3]s
WHERE flowEndSeconds >= toDateTime(%[4]d)
GROUP BY %[5]s, outcome
FORMAT JSONEachRow`

// endColumns are the columns of one end, with the address kept only for an
// end that is neither a Pod nor a Node.
func endColumns(side string) (sel, group string) {
	cols := []string{"EndpointKind", "PodNamespace", "PodName", "WorkloadKind", "WorkloadName", "NodeName"}
	var s []string
	for _, c := range cols {
		s = append(s, side+c)
	}
	group = strings.Join(append(append([]string{}, s...), side+"Address"), ", ")
	s = append(s, fmt.Sprintf("if(%[1]sPodName = '' AND %[1]sEndpointKind != 'node', %[1]sIP, '') AS %[1]sAddress", side))
	return strings.Join(s, ", "), group
}

// clickhouseFlows reads the map's rows from the flows table.
func clickhouseFlows(ctx context.Context, ch *clickhouseFlags, from time.Time, add func(mapFlow)) error {
	srcSel, srcGroup := endColumns("source")
	dstSel, dstGroup := endColumns("destination")
	return ch.query(ctx, func(table string) string {
		return fmt.Sprintf(mapQuery, srcSel, dstSel, table, from.Unix(), srcGroup+", "+dstGroup)
	}, func(r map[string]json.RawMessage) error {
		var f mapFlow
		if err := decodeRow(r, &f); err != nil {
			return err
		}
		add(f)
		return nil
	})
}

func decodeRow(r map[string]json.RawMessage, f *mapFlow) error {
	str := func(k string) (s string, err error) {
		if v, ok := r[k]; ok {
			err = json.Unmarshal(v, &s)
		}
		return
	}
	num := func(k string) (uint64, error) {
		var u chUint
		err := json.Unmarshal(r[k], &u)
		return uint64(u), err
	}
	var errs []error
	end := func(side string) flowEnd {
		var e flowEnd
		for _, c := range []struct {
			col string
			to  *string
		}{{"EndpointKind", &e.Kind}, {"PodNamespace", &e.Namespace}, {"PodName", &e.Pod}, {"WorkloadKind", &e.WorkloadKind},
			{"WorkloadName", &e.Workload}, {"NodeName", &e.Node}, {"Address", &e.Address}} {
			v, err := str(side + c.col)
			*c.to = v
			errs = append(errs, err)
		}
		return e
	}
	f.Src, f.Dst = end("source"), end("destination")
	var err error
	f.Outcome, err = str("outcome")
	errs = append(errs, err)
	for _, c := range []struct {
		col string
		to  *uint64
	}{{"connections", &f.Connections}, {"bytes", &f.Bytes}} {
		v, err := num(c.col)
		*c.to = v
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
