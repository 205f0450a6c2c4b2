package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

type printer struct {
	format string
	w      io.Writer
	tw     *tabwriter.Writer
	header bool
}

func newPrinter(format string, w io.Writer) (*printer, error) {
	switch format {
	case "table", "json", "jsonl":
	default:
		return nil, fmt.Errorf("-o: %q is not table, json or jsonl", format)
	}
	return &printer{format: format, w: w, tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}, nil
}

// outputFlag registers -o/--output for table, json or jsonl.
func outputFlag(fs *pflag.FlagSet) *string {
	return fs.StringP("output", "o", "table", "output: table, json or jsonl")
}

func (p *printer) print(flows []*pb.Flow) error {
	switch p.format {
	case "json", "jsonl":
		var opts protojson.MarshalOptions // jsonl: a flow a line
		if p.format == "json" {
			opts = protojson.MarshalOptions{Multiline: true, Indent: "  "}
		}
		for _, f := range flows {
			b, err := opts.Marshal(f)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.w, "%s\n", b); err != nil {
				return err
			}
		}
		return nil
	}
	if !p.header {
		fmt.Fprintln(p.tw, "END\tSOURCE\tDESTINATION\tPROTO\tTYPE\tSERVICE\tPOLICY\tBYTES")
		p.header = true
	}
	for _, f := range flows {
		k := f.GetK8S()
		fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n",
			f.GetEndTs().AsTime().Local().Format(time.DateTime),
			endpoint(f.GetIp().GetSource(), f.GetTransport().GetSourcePort(), k.GetSourcePodNamespace(), k.GetSourcePodName(), k.GetSourceDisclosure()),
			endpoint(f.GetIp().GetDestination(), f.GetTransport().GetDestinationPort(), k.GetDestinationPodNamespace(), k.GetDestinationPodName(), k.GetDestinationDisclosure()),
			protocol(f.GetTransport().GetProtocolNumber()),
			flowType(k.GetFlowType()),
			dash(k.GetDestinationServicePortName()),
			verdict(k),
			f.GetStats().GetOctetTotalCount()+f.GetReverseStats().GetOctetTotalCount())
	}
	return p.tw.Flush()
}

func (p *printer) flush() error { return p.tw.Flush() }

// gap prints a gap in the stream among the flows, in json and jsonl, as an
// object with the single key "gap" (a Flow has no such field), so a reader of
// the output learns of it where it happened. The table has it on stderr only.
func (p *printer) gap(g gap) error {
	var b []byte
	var err error
	switch p.format {
	case "json":
		b, err = json.MarshalIndent(map[string]gap{"gap": g}, "", "  ")
	case "jsonl":
		b, err = json.Marshal(map[string]gap{"gap": g})
	default:
		return nil
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.w, "%s\n", b)
	return err
}

// endpoint renders ns/pod (ip:port), marking a withheld identity.
func endpoint(ip []byte, port uint32, ns, pod string, d pb.EndpointDisclosure) string {
	addr := net.JoinHostPort(net.IP(ip).String(), strconv.Itoa(int(port)))
	var who string
	switch {
	case pod != "":
		who = ns + "/" + pod + " "
	case ns != "":
		who = ns + "/? "
	}
	switch d {
	case pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY:
		return who + addr + " [identity]"
	case pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW:
		return who + addr + " [redacted]"
	}
	return who + addr
}

func protocol(n uint32) string {
	switch n {
	case 1:
		return "ICMP"
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 58:
		return "ICMPv6"
	case 132:
		return "SCTP"
	}
	return strconv.Itoa(int(n))
}

func flowType(t pb.FlowType) string {
	for name, v := range flowTypes {
		if v == t {
			return name
		}
	}
	return "-"
}

func verdict(k *pb.Kubernetes) string {
	var parts []string
	for _, a := range []pb.NetworkPolicyRuleAction{k.GetEgressNetworkPolicyRuleAction(), k.GetIngressNetworkPolicyRuleAction()} {
		switch a {
		case pb.NetworkPolicyRuleAction_NETWORK_POLICY_RULE_ACTION_DROP:
			parts = append(parts, "dropped")
		case pb.NetworkPolicyRuleAction_NETWORK_POLICY_RULE_ACTION_REJECT:
			parts = append(parts, "rejected")
		}
	}
	if len(parts) == 0 {
		return "allowed"
	}
	return strings.Join(parts, ",")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
