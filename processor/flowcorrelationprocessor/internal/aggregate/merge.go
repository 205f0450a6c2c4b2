package aggregate

import "github.com/flowtel/flowtel/internal/flowrecord"

// merge completes stored (one half of a connection) with what the other half,
// in, knows: every non-empty Kubernetes field of in overwrites stored's, as
// Antrea's Flow Aggregator does. Addresses, ports, counters, conntrack data
// and the flow type stay the first record's, with two exceptions. The
// pre-DNAT destination is the one a translating half saw (see
// mergeOriginalDestination). And when in is a
// source half keyed by its SNAT address (flowrecord.KeyedBySNAT: the ingress
// Node of an SNATed from-external flow, or a source Node whose proxy
// masqueraded the connection), stored learns the real client as its source and
// the SNAT address and port, and a from-external flow becomes FROM_EXTERNAL
// again; so either arrival order gives the same record.
func merge(stored, in *flowrecord.Record, h half) {
	mergeEndpoint(&stored.Source, &in.Source)
	mergeEndpoint(&stored.Destination, &in.Destination)
	mergeOriginalDestination(stored, in, h)
	setIf(&stored.Service.PortName, in.Service.PortName)
	setIf(&stored.Service.UID, in.Service.UID)
	if in.Service.Address.IsValid() && !in.Service.Address.IsUnspecified() {
		stored.Service.Address = in.Service.Address
	}
	setIf(&stored.Service.Port, in.Service.Port)
	mergePolicy(&stored.IngressPolicy, &in.IngressPolicy)
	mergePolicy(&stored.EgressPolicy, &in.EgressPolicy)
	// Antrea does not merge Egress; we fill it when the stored half has none,
	// since only the source Node knows it.
	if stored.Egress.Name == "" && in.Egress.Name != "" {
		stored.Egress = in.Egress
	}
	if in.KeyedBySNAT() {
		stored.Source = in.Source
		stored.ProxySNATAddress = in.ProxySNATAddress
		stored.ProxySNATPort = in.ProxySNATPort
	}
	// The mirror image: a destination half keyed by its pre-DNAT destination
	// (another Node's NodePort, reached from the source Node) names the
	// endpoint its Node chose, which the source half never saw.
	if in.KeyedByPreDNAT() {
		stored.Destination = in.Destination
	}
	if in.IsIngressNodeFromExternal() {
		stored.FlowType = flowrecord.FlowTypeFromExternal
	}
}

// mergeOriginalDestination keeps the pre-DNAT destination of the half that
// performed the translation. Only that Node's conntrack saw the Service
// address (ClusterIP:port, NodeIP:NodePort); the other half has no DNAT, so
// its "original destination" is the Pod itself, and Antrea's rule (in's
// non-empty value wins) would overwrite the Service address whenever the
// translating half arrived first. A half that saw no translation only fills
// a stored half that knows none; when both halves saw one, the source half's
// wins, as the address the client dialled, so either arrival order gives the
// same record.
func mergeOriginalDestination(stored, in *flowrecord.Record, h half) {
	if !knowsOriginalDestination(in) {
		return
	}
	inDNAT, storedDNAT := in.DNATed(), stored.DNATed()
	if !knowsOriginalDestination(stored) || (inDNAT && (!storedDNAT || h == halfSource)) {
		stored.OriginalDestinationAddress = in.OriginalDestinationAddress
		stored.OriginalDestinationPort = in.OriginalDestinationPort
	}
}

func knowsOriginalDestination(r *flowrecord.Record) bool {
	return r.OriginalDestinationAddress.IsValid() && !r.OriginalDestinationAddress.IsUnspecified()
}

// mergeEndpoint fills stored's identity from in when both describe the same
// address. They differ for the source of a from-external flow: the ingress
// Node sees the external client, the destination Node the SNAT address (a
// Node endpoint), which must not overwrite the client's identity.
func mergeEndpoint(stored, in *flowrecord.Endpoint) {
	if stored.Address.Unmap() != in.Address.Unmap() {
		return
	}
	setIf(&stored.Kind, in.Kind)
	setIf(&stored.Namespace, in.Namespace)
	setIf(&stored.PodName, in.PodName)
	setIf(&stored.PodUID, in.PodUID)
	if in.PodLabels != nil {
		stored.PodLabels = in.PodLabels
	}
	setIf(&stored.WorkloadKind, in.WorkloadKind)
	setIf(&stored.WorkloadName, in.WorkloadName)
	setIf(&stored.NodeName, in.NodeName)
	setIf(&stored.NodeUID, in.NodeUID)
}

func mergePolicy(stored, in *flowrecord.Policy) {
	setIf(&stored.Type, in.Type)
	setIf(&stored.Namespace, in.Namespace)
	setIf(&stored.Name, in.Name)
	setIf(&stored.UID, in.UID)
	setIf(&stored.RuleName, in.RuleName)
	setIf(&stored.RuleAction, in.RuleAction)
}

// setIf overwrites *dst with v unless v is the zero value.
func setIf[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}
