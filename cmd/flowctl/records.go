package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// records prints the records the gateway holds (the stream's history, no
// follow), filtered by 5-tuple like antctl get flowrecords: exact on every
// field given.
func recordsCommand(kube *genericclioptions.ConfigFlags) *cobra.Command {
	cmd, conn, sc := streamCommand(kube, "records", "print the flow records the gateway holds, filtered by 5-tuple")
	fs := cmd.Flags()
	var srcIP, dstIP, proto string
	var srcPort, dstPort uint
	fs.StringVar(&srcIP, "srcip", "", "source IP address")
	fs.StringVar(&dstIP, "dstip", "", "destination IP address")
	fs.StringVar(&proto, "proto", "", "protocol number or name (tcp, udp, icmp, sctp)")
	fs.UintVar(&srcPort, "srcport", 0, "source port")
	fs.UintVar(&dstPort, "dstport", 0, "destination port")
	output := outputFlag(fs)
	return runs(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
		out, err := newPrinter(*output, stdout)
		if err != nil {
			return err
		}
		var filters []*pb.FlowFilter
		for _, ip := range []struct {
			flag, v string
			dir     pb.FlowFilterDirection
		}{{"--srcip", srcIP, pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_FROM}, {"--dstip", dstIP, pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_TO}} {
			if ip.v == "" {
				continue
			}
			if _, err := netip.ParseAddr(ip.v); err != nil {
				return fmt.Errorf("%s: %q is not an IP address", ip.flag, ip.v)
			}
			filters = append(filters, &pb.FlowFilter{Ips: []string{ip.v}, Direction: ip.dir})
		}
		protoNum := -1
		if proto != "" {
			if protoNum, err = protocolNumber(proto); err != nil {
				return err
			}
		}
		sess, err := conn.dial(ctx)
		if err != nil {
			return err
		}
		defer sess.conn.Close()
		req := &pb.GetFlowsRequest{Filters: filters}
		if err := sc.apply(req, sess); err != nil {
			return err
		}
		err = stream(ctx, sess, req, stderr, func(flows []*pb.Flow) error {
			var keep []*pb.Flow
			for _, f := range flows {
				t := f.GetTransport()
				if (protoNum >= 0 && t.GetProtocolNumber() != uint32(protoNum)) ||
					(srcPort > 0 && t.GetSourcePort() != uint32(srcPort)) ||
					(dstPort > 0 && t.GetDestinationPort() != uint32(dstPort)) {
					continue
				}
				keep = append(keep, f)
			}
			return out.print(keep)
		})
		if err != nil {
			return err
		}
		return out.flush()
	})
}

func protocolNumber(s string) (int, error) {
	switch s {
	case "tcp", "TCP":
		return 6, nil
	case "udp", "UDP":
		return 17, nil
	case "icmp", "ICMP":
		return 1, nil
	case "icmpv6", "ICMPv6":
		return 58, nil
	case "sctp", "SCTP":
		return 132, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 {
		return 0, fmt.Errorf("--proto: %q is not a protocol name or number", s)
	}
	return n, nil
}
