package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/policyinsight"
)

// followWhatIf evaluates the flow stream's flows (history since the
// window's start, then live) as they come: each flow (two ends, protocol,
// port) once, when it first appears, printing its change if the draft
// changes its verdict. It fails, once interrupted, when any was newly denied.
func followWhatIf(ctx context.Context, pf *policyFlags, sc *scopeFlags, ev *policyinsight.Evaluator, jsonl bool, stdout, stderr io.Writer) error {
	sess, err := pf.conn.dial(ctx)
	if err != nil {
		return err
	}
	defer sess.conn.Close()
	req := &pb.GetFlowsRequest{Follow: true, Since: timestamppb.New(pf.from)}
	if err := sc.apply(req, sess); err != nil {
		return err
	}
	rec := &policyinsight.Recording{}
	var seen int
	var denied uint64
	if !jsonl {
		fmt.Fprintln(stdout, "CHANGE  SOURCE  DESTINATION  PORT  DECIDED BY")
	}
	r := &reader{sess: sess, req: req, stderr: stderr}
	err = r.run(ctx, func(flows []*pb.Flow) error {
		for _, f := range flows {
			src, dst := streamEndpoints(f)
			t := f.GetTransport()
			rec.Add(src, dst, uint8(t.GetProtocolNumber()), uint16(t.GetDestinationPort()), 1, f.GetStartTs().AsTime(), f.GetEndTs().AsTime())
		}
		fresh := rec.Flows()[seen:]
		seen = len(rec.Flows())
		for _, c := range ev.Compare(fresh).Changes {
			if c.After == policyinsight.Denied {
				denied++
			}
			if err := printChange(stdout, c, jsonl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if denied > 0 {
		return fmt.Errorf("the draft would deny %d flows the cluster's policies admit", denied)
	}
	return nil
}

// printChange prints one change as a line (JSON with jsonl).
func printChange(w io.Writer, c policyinsight.Change, jsonl bool) error {
	if jsonl {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(w, "%s -> %s  %s  %s  %s/%d  %s\n", c.Before, c.After, c.Source, c.Destination, c.Protocol, c.Port, rulesText(c))
	return err
}

// streamEndpoints reads a Flow's two ends as streamEnds does: the stream
// has no endpoint kind or workload, so a named Pod is a Pod (its workload
// unknown: the Pod is its own), else a named Node that Node, else the
// address is external.
func streamEndpoints(f *pb.Flow) (src, dst policyinsight.Endpoint) {
	k := f.GetK8S()
	end := func(ip []byte, ns, pod, node string, labels *pb.Labels) policyinsight.Endpoint {
		a, _ := netip.AddrFromSlice(ip)
		e := policyinsight.Endpoint{Address: a.Unmap(), Namespace: ns, Pod: pod, Node: node, Kind: flowrecord.EndpointExternal}
		switch {
		case pod != "":
			e.Kind = flowrecord.EndpointPod
			if labels != nil {
				b, _ := json.Marshal(labels.GetLabels())
				e.Labels = string(b)
			}
		case node != "":
			e.Kind = flowrecord.EndpointNode
		}
		return e
	}
	return end(f.GetIp().GetSource(), k.GetSourcePodNamespace(), k.GetSourcePodName(), k.GetSourceNodeName(), k.GetSourcePodLabels()),
		end(f.GetIp().GetDestination(), k.GetDestinationPodNamespace(), k.GetDestinationPodName(), k.GetDestinationNodeName(), k.GetDestinationPodLabels())
}
