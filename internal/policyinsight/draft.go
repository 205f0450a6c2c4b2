package policyinsight

import (
	"errors"
	"fmt"
	"io"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"
)

// DeleteAnnotation on an object of a draft, with the value "delete", makes
// the draft delete that object (by kind, Namespace and name) instead of
// creating or changing it; the rest of the object is not read.
const DeleteAnnotation = "policy.flowtel.io/what-if"

// Draft is a set of policy changes: objects created or changed, and
// objects deleted.
type Draft struct {
	changes []change
}

type change struct {
	ref    Ref
	delete bool
	apply  func(*Snapshot)
}

// Refs lists what the draft touches, in the order it was given.
func (d *Draft) Refs() []Ref {
	out := make([]Ref, len(d.changes))
	for i, c := range d.changes {
		out[i] = c.ref
	}
	return out
}

// ParseDraft reads YAML or JSON documents (several separated by "---", or a
// List) of NetworkPolicies (Namespace namespace when they name none),
// AdminNetworkPolicies and BaselineAdminNetworkPolicies.
func ParseDraft(r io.Reader, namespace string) (*Draft, error) {
	d := &Draft{}
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for i := 1; ; i++ {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("draft document %d: %w", i, err)
		}
		if obj.Object == nil {
			continue // an empty document
		}
		items := []unstructured.Unstructured{obj}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("draft document %d: %w", i, err)
			}
			items = list.Items
		}
		for _, it := range items {
			c, err := parseChange(&it, namespace)
			if err != nil {
				return nil, fmt.Errorf("draft document %d: %w", i, err)
			}
			d.changes = append(d.changes, c)
		}
	}
	if len(d.changes) == 0 {
		return nil, errors.New("draft: no policy objects")
	}
	return d, nil
}

func parseChange(u *unstructured.Unstructured, namespace string) (change, error) {
	gv := u.GetAPIVersion()
	c := change{ref: Ref{Kind: u.GetKind(), Name: u.GetName()}, delete: u.GetAnnotations()[DeleteAnnotation] == "delete"}
	if c.ref.Name == "" {
		return c, fmt.Errorf("%s without a name", c.ref.Kind)
	}
	conv := func(into any) error {
		return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true)
	}
	switch {
	case c.ref.Kind == KindNetworkPolicy && gv == networkingv1.SchemeGroupVersion.String():
		c.ref.Namespace = u.GetNamespace()
		if c.ref.Namespace == "" {
			c.ref.Namespace = namespace
		}
		if c.ref.Namespace == "" {
			return c, fmt.Errorf("%s names no Namespace (give one, or -n)", c.ref)
		}
		var np networkingv1.NetworkPolicy
		if err := conv(&np); err != nil {
			return c, fmt.Errorf("%s: %w", c.ref, err)
		}
		np.Namespace = c.ref.Namespace
		c.apply = func(s *Snapshot) { s.SetNetworkPolicy(&np) }
	case c.ref.Kind == KindAdminNetworkPolicy && gv == v1alpha1.GroupVersion.String():
		var anp v1alpha1.AdminNetworkPolicy
		if err := conv(&anp); err != nil {
			return c, fmt.Errorf("%s: %w", c.ref, err)
		}
		c.apply = func(s *Snapshot) { s.SetAdminPolicy(&anp) }
	case c.ref.Kind == KindBaselineAdminNetworkPolicy && gv == v1alpha1.GroupVersion.String():
		var banp v1alpha1.BaselineAdminNetworkPolicy
		if err := conv(&banp); err != nil {
			return c, fmt.Errorf("%s: %w", c.ref, err)
		}
		c.apply = func(s *Snapshot) { s.SetBaselinePolicy(&banp) }
	default:
		return c, fmt.Errorf("%s %s/%s is not a NetworkPolicy (networking.k8s.io/v1), AdminNetworkPolicy or BaselineAdminNetworkPolicy (%s)",
			gv, c.ref.Kind, c.ref.Name, v1alpha1.GroupVersion)
	}
	return c, nil
}

// Apply returns the snapshot with the draft applied; deleting an object the
// snapshot does not hold is an error (a misspelt name would otherwise
// change nothing, silently).
func (d *Draft) Apply(s *Snapshot) (*Snapshot, error) {
	out := s.Clone()
	for _, c := range d.changes {
		if c.delete {
			if !out.Delete(c.ref) {
				return nil, fmt.Errorf("draft deletes %s, which the cluster does not have", c.ref)
			}
			continue
		}
		c.apply(out)
	}
	return out, nil
}

// scope is what a draft can change: the verdicts of Pods in these
// Namespaces (NetworkPolicies), or every Pod's (cluster-scoped policies).
type scope struct {
	namespaces map[string]bool
	cluster    bool
}

func (d *Draft) scope() scope {
	sc := scope{namespaces: map[string]bool{}}
	for _, c := range d.changes {
		if c.ref.Kind == KindNetworkPolicy {
			sc.namespaces[c.ref.Namespace] = true
		} else {
			sc.cluster = true
		}
	}
	return sc
}

// touches reports whether the draft can change a verdict whose subject
// (the Pod the direction's policies select) is in namespace.
func (sc scope) touches(namespace string) bool {
	return sc.cluster || sc.namespaces[namespace]
}
