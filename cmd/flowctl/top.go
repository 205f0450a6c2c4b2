package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

var topGroups = map[string]pb.TopGroupBy{
	"workload":  pb.TopGroupBy_TOP_GROUP_BY_WORKLOAD,
	"service":   pb.TopGroupBy_TOP_GROUP_BY_SERVICE,
	"namespace": pb.TopGroupBy_TOP_GROUP_BY_NAMESPACE,
}

var topOrders = map[string]pb.TopOrderBy{
	"bytes":       pb.TopOrderBy_TOP_ORDER_BY_BYTES,
	"connections": pb.TopOrderBy_TOP_ORDER_BY_CONNECTIONS,
}

// topCommand prints the top talkers of the flow history over a window,
// summed by the gateway in its ClickHouse with the caller's RBAC scope.
func topCommand(kube *genericclioptions.ConfigFlags) *cobra.Command {
	cmd, conn, sc := streamCommand(kube, "top", "the top talkers over a window (workload pairs, Services or Namespaces), summed by the gateway")
	fs := cmd.Flags()
	since := fs.String("since", "1h", "the window's start: a duration (1h, 7d) or an RFC 3339 time")
	until := fs.String("until", "", "the window's end: a duration ago or an RFC 3339 time (default now)")
	by := fs.String("by", "workload", "what a talker is: workload (to workload), service (workload to Service) or namespace (to Namespace)")
	sortBy := fs.String("sort", "bytes", "bytes or connections")
	limit := fs.Uint("limit", 10, "how many talkers (at most 1000)")
	output := fs.StringP("output", "o", "table", "table or json")
	return runs(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
		group, ok := topGroups[*by]
		if !ok {
			return fmt.Errorf("--by: %q is not workload, service or namespace", *by)
		}
		order, ok := topOrders[*sortBy]
		if !ok {
			return fmt.Errorf("--sort: %q is not bytes or connections", *sortBy)
		}
		if *output != "table" && *output != "json" {
			return fmt.Errorf("-o: %q is not table or json", *output)
		}
		now := time.Now()
		from, err := parseSince(*since, now)
		if err != nil {
			return err
		}
		req := &pb.GetTopTalkersRequest{Since: timestamppb.New(from), GroupBy: group, OrderBy: order, Limit: uint32(*limit)}
		if *until != "" {
			to, err := parseSince(*until, now)
			if err != nil {
				return fmt.Errorf("--until: %w", err)
			}
			req.Until = timestamppb.New(to)
		}
		sess, err := conn.dial(ctx)
		if err != nil {
			return err
		}
		defer sess.conn.Close()
		scope := &pb.GetFlowsRequest{}
		if err := sc.apply(scope, sess); err != nil {
			return err
		}
		req.ClusterWide, req.Namespaces = scope.ClusterWide, scope.Namespaces
		resp, err := pb.NewFlowTopServiceClient(sess.conn).GetTopTalkers(sess.context(ctx), req)
		if err != nil {
			return explain(err, sess.target)
		}
		if resp.Truncated {
			fmt.Fprintf(stderr, "flowctl: the gateway bounded the query at %d groups: these are the top of those\n", resp.Groups)
		}
		if *output == "json" {
			b, err := protojson.MarshalOptions{Multiline: true}.Marshal(resp)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(stdout, string(b))
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "SOURCE\tDESTINATION\tBYTES\tPACKETS\tCONNECTIONS")
		for _, t := range resp.Talkers {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", talker(t.SourceNamespace, t.SourceName, t.SourceDisclosure),
				talker(t.DestinationNamespace, t.DestinationName, t.DestinationDisclosure), t.Bytes, t.Packets, t.Connections)
		}
		return tw.Flush()
	})
}

// talker is one side of a pair: namespace/name, with ? for what is withheld.
func talker(ns, name string, d pb.EndpointDisclosure) string {
	var parts []string
	if ns != "" {
		parts = append(parts, ns)
	}
	if name != "" {
		parts = append(parts, name)
	} else if d == pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW {
		parts = append(parts, "?")
	}
	s := strings.Join(parts, "/")
	if d == pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW {
		s += " [redacted]"
	}
	if s == "" {
		return "-"
	}
	return s
}
