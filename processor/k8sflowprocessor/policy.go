package k8sflowprocessor

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/k8sindex"
	"github.com/flowtel/flowtel/internal/netpol"
)

// policyCounts counts the sides evaluated, by outcome (netpol.Outcome); the
// batch's record() adds and resets them.
type policyCounts [4]atomic.Int64

var policyOutcomes = [4]metric.MeasurementOption{
	netpol.Unisolated:   withAttr("outcome", netpol.Unisolated.String()),
	netpol.Allowed:      withAttr("outcome", netpol.Allowed.String()),
	netpol.Denied:       withAttr("outcome", netpol.Denied.String()),
	netpol.Undetermined: withAttr("outcome", netpol.Undetermined.String()),
}

func (c *policyCounts) record(ctx context.Context, counter metric.Int64Counter) {
	for o := range c {
		if n := c[o].Swap(0); n > 0 {
			counter.Add(ctx, n, policyOutcomes[o])
		}
	}
}

// attributePolicies fills r's policy fields from the NetworkPolicies as
// they stood at its start (decision D12), for the sides whose Pod runs on
// local: ingress when the destination Pod does, egress when the source Pod
// does, as the Node that enforces a Pod's policies is the one that knows
// them and the gateway merges the halves (Antrea's split). A side that
// comes in without an action is a connection the datapath let through
// (conntrack): an admitting policy is named with Allow, nothing else is
// claimed. A side that comes in with Drop or Reject is the conntrack
// receiver's denied-connection record (the NFLOG rule's action): it names
// the isolating policy with that action, or the action alone when no
// known policy isolated the Pod (the CNI dropped it for its own reasons, or
// the policy is not known yet): the datapath is not contradicted.
func (p *k8sFlowProcessor) attributePolicies(v k8sindex.View, r *flowrecord.Record, local string) {
	set := func(dst *flowrecord.Policy, ep *flowrecord.Endpoint, ingress bool) {
		if ep.Kind != flowrecord.EndpointPod || ep.NodeName != local {
			return // another Node's side, or no Pod: that Node says, or there is no policy
		}
		verdict := v.PolicyVerdict(r, ingress)
		p.policies[verdict.Outcome].Add(1)
		if action := dst.RuleAction; action == flowrecord.RuleActionDrop || action == flowrecord.RuleActionReject {
			// The datapath's action is what happened; a policy is named only
			// when the evaluation agrees that one isolated the Pod.
			*dst = flowrecord.Policy{RuleAction: action}
			if verdict.Outcome == netpol.Denied {
				*dst = verdict.Denied(action)
			}
		} else {
			*dst = verdict.Observed()
		}
	}
	set(&r.IngressPolicy, &r.Destination, true)
	set(&r.EgressPolicy, &r.Source, false)
}
