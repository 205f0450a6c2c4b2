package policyinsight

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/netpol"
)

// Isolation says which Pods recommended policies isolate.
type Isolation string

const (
	// IsolateApplied isolates only the workloads a policy is recommended
	// for; Pods never seen stay as they are.
	IsolateApplied Isolation = "applied"
	// IsolateAll adds a policy that isolates every Pod of the Namespace for
	// ingress and egress: what was not seen is denied.
	IsolateAll Isolation = "all"
)

// RecommendOptions tune Recommend.
type RecommendOptions struct {
	Isolation Isolation
	// MinObserved is how long a workload must have been seen (its first
	// connection's start to its last one's end) for its connections to be
	// taken as all it needs. A workload seen for less gets no policy with
	// IsolateApplied (it stays open), and one from what was seen, with a
	// note, with IsolateAll (which denies it anyway).
	MinObserved time.Duration
	// DNS is the peer every recommended egress policy may reach on port 53
	// (UDP and TCP), whether or not the window saw it: a Pod that resolved
	// no name in the window still will. Nil: the Pods labelled
	// k8s-app=kube-dns in kube-system (CoreDNS's labels in kubeadm and most
	// distributions).
	DNS *networkingv1.NetworkPolicyPeer
	// Kind is RecommendNetworkPolicies ("" too) or RecommendAdminPolicies:
	// one AdminNetworkPolicy per workload, at Priority, Priority+1, ... in
	// the order of the workloads' names (the Namespace's default deny of
	// IsolateAll last).
	Kind     string
	Priority int32
	// APILabels (ResolveLabels's) select the workloads whose records
	// carry no labels; nil: only recorded labels.
	APILabels *APILabels
}

// Labels that differ between the Pods of one workload, or between its
// versions, and so never go into a selector.
var volatileLabels = map[string]bool{
	"pod-template-hash":                  true, // Deployment's ReplicaSet
	"controller-revision-hash":           true, // StatefulSet, DaemonSet
	"pod-template-generation":            true, // DaemonSet
	"statefulset.kubernetes.io/pod-name": true,
	"apps.kubernetes.io/pod-index":       true,
	"controller-uid":                     true, // Job
	"batch.kubernetes.io/controller-uid": true,
}

// NamespaceNameLabel is the label the API server sets on every Namespace
// to its name: a namespaceSelector on it selects one Namespace whatever
// its other labels are.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// Recommendation is Recommend's answer.
type Recommendation struct {
	Policies      []*networkingv1.NetworkPolicy
	AdminPolicies []*v1alpha1.AdminNetworkPolicy
	// Notes say what the policies could not express exactly, and which
	// workloads were left out or seen too briefly.
	Notes []string
}

// workload is what the window shows of one Pod workload.
type workload struct {
	name        string // Endpoint.Workload()
	namespace   string
	stable      map[string]string // labels every recorded Pod of it had, minus volatile ones
	labelled    bool              // some record had its labels
	first, last time.Time
}

// Recommend writes NetworkPolicies for the workloads of namespace that admit
// the recorded flows to and from them (by Pod and Namespace, port and
// protocol), and nothing else to those workloads but DNS.
func Recommend(namespace string, flows []*Flow, o RecommendOptions) *Recommendation {
	rec := &Recommendation{}
	workloads := map[string]*workload{}
	see := func(e *Endpoint, f *Flow) {
		if e.Kind != flowrecord.EndpointPod {
			return
		}
		k := e.Workload()
		w := workloads[k]
		if w == nil {
			w = &workload{name: k, namespace: e.Namespace, first: f.First, last: f.Last}
			workloads[k] = w
		}
		w.first, w.last = minTime(w.first, f.First), maxTime(w.last, f.Last)
		l := LabelsOf(e)
		if l == nil {
			return
		}
		if !w.labelled {
			w.stable, w.labelled = maps.Clone(l), true
			maps.DeleteFunc(w.stable, func(k, _ string) bool { return volatileLabels[k] })
			return
		}
		maps.DeleteFunc(w.stable, func(k, v string) bool { return l[k] != v })
	}
	for _, f := range flows {
		see(f.Source, f)
		see(f.Destination, f)
	}

	var names []string
	for k, w := range workloads {
		if w.namespace == namespace {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	dns := o.DNS
	if dns == nil {
		dns = &networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: "kube-system"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
		}
	}
	if a := o.APILabels; a != nil {
		for k, w := range workloads {
			// ResolveLabels filled only workloads without recorded labels:
			// their controller's selector, not every label of its template.
			if sel, ok := a.Selectors[k]; ok {
				w.stable = maps.Clone(sel)
			}
		}
	}
	for _, k := range names {
		w := workloads[k]
		if why := o.APILabels.Note(k, "no policy selects it"); len(w.stable) == 0 && why != "" {
			rec.Notes = append(rec.Notes, why)
			continue
		}
		if len(w.stable) == 0 {
			rec.Notes = append(rec.Notes, fmt.Sprintf("%s: no label all its recorded Pods shared (or none recorded): no policy selects it", k))
			continue
		}
		if seen := w.last.Sub(w.first); seen < o.MinObserved {
			if o.Isolation != IsolateAll {
				rec.Notes = append(rec.Notes, fmt.Sprintf("%s: seen for %s, less than %s: no policy (it stays open)", k, seen.Round(time.Second), o.MinObserved))
				continue
			}
			rec.Notes = append(rec.Notes, fmt.Sprintf("%s: seen for %s, less than %s: its policy admits only what was seen", k, seen.Round(time.Second), o.MinObserved))
		}
		rec.Policies = append(rec.Policies, workloadPolicy(w, flows, workloads, dns, rec))
	}
	if o.Kind == RecommendAdminPolicies {
		for i, np := range rec.Policies {
			rec.AdminPolicies = append(rec.AdminPolicies, adminFrom(np, o.Priority+int32(i), rec))
		}
		if o.Isolation == IsolateAll {
			rec.AdminPolicies = append(rec.AdminPolicies, adminDefaultDeny(namespace, o.Priority+int32(len(rec.Policies))))
		}
		rec.Policies = nil
		return rec
	}
	if o.Isolation == IsolateAll {
		rec.Policies = append(rec.Policies, &networkingv1.NetworkPolicy{
			TypeMeta:   policyType,
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "flowtel-default-deny"},
			Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			},
		})
	}
	return rec
}

var policyType = metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: KindNetworkPolicy}

// portKey is a rule's port.
type portKey struct {
	proto uint8
	port  uint16
}

// workloadPolicy admits w's recorded ingress and egress, one rule per peer.
func workloadPolicy(w *workload, flows []*Flow, workloads map[string]*workload, dns *networkingv1.NetworkPolicyPeer, rec *Recommendation) *networkingv1.NetworkPolicy {
	ingress, egress := map[string]*peerPorts{}, map[string]*peerPorts{}
	add := func(rules map[string]*peerPorts, peer *Endpoint, f *Flow) {
		key, p := peerOf(w.namespace, peer, workloads, rec)
		pp := rules[key]
		if pp == nil {
			pp = &peerPorts{peer: p, ports: map[portKey]bool{}}
			rules[key] = pp
		}
		pp.ports[portKey{f.Protocol, f.Port}] = true
	}
	for _, f := range flows {
		if f.Destination.Kind == flowrecord.EndpointPod && f.Destination.Workload() == w.name {
			add(ingress, f.Source, f)
		}
		if f.Source.Kind == flowrecord.EndpointPod && f.Source.Workload() == w.name {
			add(egress, f.Destination, f)
		}
	}
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   policyType,
		ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace, Name: policyName(w.name)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: w.stable},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	for _, pp := range sortedPeers(ingress) {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{pp.peer}, Ports: pp.rulePorts()})
	}
	dnsPorts := map[portKey]bool{{netpol.ProtocolUDP, 53}: true, {netpol.ProtocolTCP, 53}: true}
	for _, pp := range sortedPeers(egress) {
		if equality.Semantic.DeepEqual(pp.peer, *dns) {
			// What the DNS rule below admits needs no rule of its own.
			maps.DeleteFunc(pp.ports, func(k portKey, _ bool) bool { return dnsPorts[k] })
			if len(pp.ports) == 0 {
				continue
			}
		}
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{pp.peer}, Ports: pp.rulePorts()})
	}
	np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{*dns}, Ports: (&peerPorts{ports: dnsPorts}).rulePorts()})
	return np
}

type peerPorts struct {
	key   string
	peer  networkingv1.NetworkPolicyPeer
	ports map[portKey]bool
}

func sortedPeers(m map[string]*peerPorts) []*peerPorts {
	out := make([]*peerPorts, 0, len(m))
	for k, pp := range m {
		pp.key = k
		out = append(out, pp)
	}
	slices.SortFunc(out, func(a, b *peerPorts) int { return cmp.Compare(a.key, b.key) })
	return out
}

func (pp *peerPorts) rulePorts() []networkingv1.NetworkPolicyPort {
	keys := slices.SortedFunc(maps.Keys(pp.ports), func(a, b portKey) int {
		return cmp.Or(cmp.Compare(a.proto, b.proto), cmp.Compare(a.port, b.port))
	})
	out := make([]networkingv1.NetworkPolicyPort, 0, len(keys))
	for _, k := range keys {
		proto := corev1.ProtocolTCP
		switch k.proto {
		case netpol.ProtocolUDP:
			proto = corev1.ProtocolUDP
		case netpol.ProtocolSCTP:
			proto = corev1.ProtocolSCTP
		}
		port := intstr.FromInt32(int32(k.port))
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port})
	}
	return out
}

// peerOf is the peer a rule names for a recorded end, and a key that sorts
// and groups it: a workload's Pods by their stable labels (in their
// Namespace, by its name label), a Node or an external address by its
// address alone (NetworkPolicies cannot select Nodes).
func peerOf(namespace string, e *Endpoint, workloads map[string]*workload, rec *Recommendation) (string, networkingv1.NetworkPolicyPeer) {
	if e.Kind != flowrecord.EndpointPod {
		a := e.Address.Unmap()
		cidr := netip.PrefixFrom(a, a.BitLen()).String()
		return "2 " + e.Kind.String() + " " + cidr, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}
	}
	var p networkingv1.NetworkPolicyPeer
	if e.Namespace != namespace {
		p.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: e.Namespace}}
	}
	w := workloads[e.Workload()]
	if len(w.stable) == 0 {
		note := fmt.Sprintf("%s: no label all its recorded Pods shared: rules admit every Pod of Namespace %s for it", w.name, e.Namespace)
		if !slices.Contains(rec.Notes, note) {
			rec.Notes = append(rec.Notes, note)
		}
		if p.NamespaceSelector == nil {
			p.PodSelector = &metav1.LabelSelector{}
		}
		return "1 " + e.Namespace, p
	}
	p.PodSelector = &metav1.LabelSelector{MatchLabels: w.stable}
	return "0 " + w.name, p
}

var nameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// policyName is flowtel-<workload name>, as a DNS label.
func policyName(workload string) string {
	name := workload[strings.LastIndex(workload, "/")+1:]
	name = strings.Trim(nameChars.ReplaceAllString(strings.ToLower(name), "-"), "-")
	return strings.TrimRight(("flowtel-" + name)[:min(len("flowtel-"+name), 63)], "-")
}

// YAML writes the policies as YAML documents separated by "---", each
// note as a comment first (kubectl apply -f reads it; ParseDraft too).
func (r *Recommendation) YAML() ([]byte, error) {
	var b strings.Builder
	for _, n := range r.Notes {
		b.WriteString("# " + n + "\n")
	}
	var docs []map[string]any
	for _, p := range r.Policies {
		docs = append(docs, document(p.TypeMeta, map[string]any{"name": p.Name, "namespace": p.Namespace}, p.Spec))
	}
	for _, p := range r.AdminPolicies {
		docs = append(docs, document(p.TypeMeta, map[string]any{"name": p.Name}, p.Spec))
	}
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		b.Write(y)
	}
	return []byte(b.String()), nil
}

// document is an object without the fields a new object has no value for
// (status, creationTimestamp: null), which kubectl apply would only
// complain about.
func document(t metav1.TypeMeta, meta map[string]any, spec any) map[string]any {
	return map[string]any{"apiVersion": t.APIVersion, "kind": t.Kind, "metadata": meta, "spec": spec}
}

// Draft is the recommendation as a what-if draft: its policies created.
func (r *Recommendation) Draft() *Draft {
	d := &Draft{}
	for _, p := range r.Policies {
		d.changes = append(d.changes, change{ref: Ref{KindNetworkPolicy, p.Namespace, p.Name}, apply: func(s *Snapshot) { s.SetNetworkPolicy(p) }})
	}
	for _, p := range r.AdminPolicies {
		d.changes = append(d.changes, change{ref: Ref{KindAdminNetworkPolicy, "", p.Name}, apply: func(s *Snapshot) { s.SetAdminPolicy(p) }})
	}
	return d
}
