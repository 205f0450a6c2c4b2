package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// list is a repeatable (and comma-separated) string flag.
type list []string

func (l *list) String() string { return strings.Join(*l, ",") }
func (l *list) Type() string   { return "strings" }
func (l *list) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

var flowTypes = map[string]pb.FlowType{
	"intra-node":    pb.FlowType_FLOW_TYPE_INTRA_NODE,
	"inter-node":    pb.FlowType_FLOW_TYPE_INTER_NODE,
	"to-external":   pb.FlowType_FLOW_TYPE_TO_EXTERNAL,
	"from-external": pb.FlowType_FLOW_TYPE_FROM_EXTERNAL,
}

var directions = map[string]pb.FlowFilterDirection{
	"both": pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_BOTH,
	"from": pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_FROM,
	"to":   pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_TO,
}

// scopeFlags select what the stream is opened for: a Namespace (-n,
// kubectl's flag on the root command, else the kubeconfig context's) or
// every one.
type scopeFlags struct {
	kube        *genericclioptions.ConfigFlags
	namespace   string // what -n gave, when there is no kube
	clusterWide bool
}

// given is the Namespace -n names, if any.
func (s *scopeFlags) given() string {
	if s.namespace == "" && s.kube != nil {
		return *s.kube.Namespace
	}
	return s.namespace
}

func (s *scopeFlags) register(fs *pflag.FlagSet, kube *genericclioptions.ConfigFlags) {
	s.kube = kube
	fs.BoolVar(&s.clusterWide, "cluster-wide", false, "every Namespace, and flows with none (needs a ClusterRoleBinding); -n is one Namespace (default the kubeconfig context's)")
}

// streamCommand is a command that reads the flow stream: it has the
// connection's flags and the scope's (--cluster-wide; -n is kubectl's).
func streamCommand(kube *genericclioptions.ConfigFlags, use, short string) (*cobra.Command, *connFlags, *scopeFlags) {
	cmd := newCommand(use, short)
	conn, sc := &connFlags{kube: kube}, &scopeFlags{}
	conn.register(cmd.Flags())
	sc.register(cmd.Flags(), kube)
	return cmd, conn, sc
}

func (s *scopeFlags) apply(req *pb.GetFlowsRequest, sess *session) error {
	if s.clusterWide {
		if s.given() != "" {
			return errors.New("-n and --cluster-wide exclude each other")
		}
		req.ClusterWide = true
		return nil
	}
	ns := s.given()
	if ns == "" {
		ns = sess.namespace
	}
	req.Namespaces = []string{ns}
	return nil
}

// observeCommand streams flows: history, then live ones with -f.
func observeCommand(kube *genericclioptions.ConfigFlags) *cobra.Command {
	cmd, conn, sc := streamCommand(kube, "observe", "stream flows: history, then live ones with -f")
	fs := cmd.Flags()
	var pods, services, types, ips list
	var selector, direction, since string
	var last, maxCount uint
	var follow bool
	fs.Var(&pods, "pod", "Pod name (repeatable, OR-ed)")
	fs.StringVarP(&selector, "selector", "l", "", "label selector against the Pods' labels")
	fs.Var(&services, "service", "Service name (repeatable, OR-ed; destination side)")
	fs.Var(&types, "flow-type", "intra-node, inter-node, to-external or from-external (repeatable)")
	fs.Var(&ips, "ip", "IP address or CIDR (repeatable)")
	fs.StringVar(&direction, "direction", "both", "which endpoint the Pod, label and IP filters apply to: both, from or to")
	fs.StringVar(&since, "since", "", "only flows that ended after this: a duration (5m, 7d) or an RFC 3339 time; older than the gateway holds in memory is read from its flow history")
	fs.UintVar(&last, "last", 0, "print only the N most recent flows of the history (not with -f)")
	fs.UintVar(&maxCount, "max-count", 0, "stop after N flows (the server's max_count)")
	fs.BoolVarP(&follow, "follow", "f", false, "follow: after the history, print live flows until interrupted")
	output := outputFlag(fs)
	return runs(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
		out, err := newPrinter(*output, stdout)
		if err != nil {
			return err
		}
		if last > 0 && follow {
			return errors.New("--last and -f exclude each other: --since bounds the history of a following stream")
		}
		filter := &pb.FlowFilter{PodNames: pods, PodLabelSelector: selector, ServiceNames: services, Ips: ips}
		d, ok := directions[direction]
		if !ok {
			return fmt.Errorf("--direction: %q is not both, from or to", direction)
		}
		filter.Direction = d
		for _, t := range types {
			ft, ok := flowTypes[t]
			if !ok {
				return fmt.Errorf("--flow-type: %q is not intra-node, inter-node, to-external or from-external", t)
			}
			filter.FlowTypes = append(filter.FlowTypes, ft)
		}
		for _, ip := range ips {
			if _, err := netip.ParsePrefix(ip); err != nil {
				if _, err := netip.ParseAddr(ip); err != nil {
					return fmt.Errorf("--ip: %q is not an IP address or CIDR", ip)
				}
			}
		}
		req := &pb.GetFlowsRequest{Follow: follow, MaxCount: uint32(maxCount), Filters: []*pb.FlowFilter{filter}}
		if since != "" {
			t, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			req.Since = timestamppb.New(t)
		}
		sess, err := conn.dial(ctx)
		if err != nil {
			return err
		}
		defer sess.conn.Close()
		if err := sc.apply(req, sess); err != nil {
			return err
		}
		var tail []*pb.Flow
		r := &reader{sess: sess, req: req, stderr: stderr, gap: out.gap}
		err = r.run(ctx, func(flows []*pb.Flow) error {
			if last > 0 {
				tail = append(tail, flows...)
				if extra := len(tail) - int(last); extra > 0 {
					tail = tail[extra:]
				}
				return nil
			}
			return out.print(flows)
		})
		if err != nil {
			return err
		}
		if last > 0 {
			return out.print(tail)
		}
		return out.flush()
	})
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := parseAge(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since: %q is neither a duration (5m, 24h, 7d) nor an RFC 3339 time", s)
	}
	return t, nil
}

// parseAge is a Go duration, optionally after a number of days ("7d",
// "1d12h"): Go's durations stop at hours, and history is asked in days.
func parseAge(s string) (time.Duration, error) {
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseUint(days, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%q: not a number of days", days)
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest == "" {
		return d, nil
	}
	r, err := time.ParseDuration(rest)
	return d + r, err
}
