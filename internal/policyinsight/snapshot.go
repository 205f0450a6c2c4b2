package policyinsight

import (
	"cmp"
	"maps"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/flowtel/flowtel/internal/netpol"
)

// Kinds of the policy objects a Snapshot and a Draft hold.
const (
	KindNetworkPolicy              = "NetworkPolicy"
	KindAdminNetworkPolicy         = "AdminNetworkPolicy"
	KindBaselineAdminNetworkPolicy = "BaselineAdminNetworkPolicy"
)

// Ref names one policy object; Namespace is empty for the cluster-scoped kinds.
type Ref struct {
	Kind, Namespace, Name string
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// Snapshot is the cluster's policy objects and Namespace labels at one
// moment. The zero value is an empty cluster; Set and Delete change it.
type Snapshot struct {
	policies   map[Ref]*netpol.Policy
	namespaces map[string]map[string]string
}

// SetNamespace records a Namespace's labels.
func (s *Snapshot) SetNamespace(name string, labels map[string]string) {
	if s.namespaces == nil {
		s.namespaces = map[string]map[string]string{}
	}
	if labels == nil {
		labels = map[string]string{}
	}
	s.namespaces[name] = labels
}

// SetNetworkPolicy adds or replaces a NetworkPolicy.
func (s *Snapshot) SetNetworkPolicy(np *networkingv1.NetworkPolicy) {
	s.set(Ref{KindNetworkPolicy, np.Namespace, np.Name}, netpol.FromAPI(np))
}

// SetAdminPolicy adds or replaces an AdminNetworkPolicy.
func (s *Snapshot) SetAdminPolicy(anp *v1alpha1.AdminNetworkPolicy) {
	s.set(Ref{KindAdminNetworkPolicy, "", anp.Name}, netpol.FromAdmin(anp))
}

// SetBaselinePolicy adds or replaces a BaselineAdminNetworkPolicy.
func (s *Snapshot) SetBaselinePolicy(banp *v1alpha1.BaselineAdminNetworkPolicy) {
	s.set(Ref{KindBaselineAdminNetworkPolicy, "", banp.Name}, netpol.FromBaseline(banp))
}

func (s *Snapshot) set(r Ref, p *netpol.Policy) {
	if s.policies == nil {
		s.policies = map[Ref]*netpol.Policy{}
	}
	// The evaluator names policies by these fields; a draft's new object
	// has no UID yet.
	p.Namespace, p.Name = r.Namespace, r.Name
	s.policies[r] = p
}

// Delete removes a policy; false when the snapshot has none by that name.
func (s *Snapshot) Delete(r Ref) bool {
	_, ok := s.policies[r]
	delete(s.policies, r)
	return ok
}

// Has reports whether the snapshot holds the policy.
func (s *Snapshot) Has(r Ref) bool {
	_, ok := s.policies[r]
	return ok
}

// Len is the number of policy objects.
func (s *Snapshot) Len() int { return len(s.policies) }

// Clone returns a copy that changes independently (the converted policies
// themselves are shared: nothing modifies them).
func (s *Snapshot) Clone() *Snapshot {
	return &Snapshot{policies: maps.Clone(s.policies), namespaces: maps.Clone(s.namespaces)}
}

// Cluster returns the snapshot as the evaluator's Cluster: the same answer
// at every time. Later changes to the snapshot do not reach it.
func (s *Snapshot) Cluster() netpol.Cluster {
	c := &staticCluster{byNamespace: map[string][]*netpol.Policy{}, namespaces: maps.Clone(s.namespaces)}
	for r, p := range s.policies {
		switch r.Kind {
		case KindNetworkPolicy:
			c.byNamespace[r.Namespace] = append(c.byNamespace[r.Namespace], p)
		case KindAdminNetworkPolicy:
			c.admin = append(c.admin, p)
		case KindBaselineAdminNetworkPolicy:
			c.baseline = append(c.baseline, p)
		}
	}
	byName := func(a, b *netpol.Policy) int { return cmp.Compare(a.Name, b.Name) }
	for _, ps := range c.byNamespace {
		slices.SortFunc(ps, byName)
	}
	slices.SortFunc(c.admin, func(a, b *netpol.Policy) int { return cmp.Or(cmp.Compare(a.Priority, b.Priority), byName(a, b)) })
	slices.SortFunc(c.baseline, byName)
	c.bySubject = make(map[string]*subjectCluster, len(c.namespaces))
	for ns, l := range c.namespaces {
		c.bySubject[ns] = &subjectCluster{staticCluster: c, admin: selecting(c.admin, l), baseline: selecting(c.baseline, l)}
	}
	return c
}

// selecting keeps the cluster-scoped policies whose Namespace selector
// matches a Namespace's labels: the others cannot select its Pods. With
// 500 policies most AdminNetworkPolicies select a few Namespaces, and
// skipping them here, once per Namespace, saves matching each of them for
// every connection (BenchmarkWhatIf).
func selecting(ps []*netpol.Policy, nsLabels map[string]string) []*netpol.Policy {
	var out []*netpol.Policy
	for _, p := range ps {
		if p.NamespaceSelector == nil || p.NamespaceSelector.Matches(labels.Set(nsLabels)) {
			out = append(out, p)
		}
	}
	return out
}

// staticCluster is a netpol.Cluster without history.
type staticCluster struct {
	byNamespace     map[string][]*netpol.Policy
	admin, baseline []*netpol.Policy
	namespaces      map[string]map[string]string
	// bySubject is the cluster as seen by the Pods of a known Namespace.
	bySubject map[string]*subjectCluster
}

// subjectCluster answers for a subject Pod in one Namespace: only the
// cluster-scoped policies that can select it.
type subjectCluster struct {
	*staticCluster
	admin, baseline []*netpol.Policy
}

func (c *subjectCluster) AdminPolicies(time.Time) []*netpol.Policy    { return c.admin }
func (c *subjectCluster) BaselinePolicies(time.Time) []*netpol.Policy { return c.baseline }

// forSubject is the cluster for evaluating a direction whose subject Pod
// is in namespace (the cluster itself for a Namespace it does not know).
func (c *staticCluster) forSubject(namespace string) netpol.Cluster {
	if sc := c.bySubject[namespace]; sc != nil {
		return sc
	}
	return c
}

func (c *staticCluster) Policies(namespace string, _ time.Time) []*netpol.Policy {
	return c.byNamespace[namespace]
}

func (c *staticCluster) NamespaceLabels(namespace string, _ time.Time) (map[string]string, bool) {
	l, ok := c.namespaces[namespace]
	return l, ok
}

func (c *staticCluster) AdminPolicies(time.Time) []*netpol.Policy    { return c.admin }
func (c *staticCluster) BaselinePolicies(time.Time) []*netpol.Policy { return c.baseline }
