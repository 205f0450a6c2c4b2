package k8sindex

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// objectRef names a namespaced object of a kind.
type objectRef struct{ kind, namespace, name string }

// ownerRef is a controller reference: kind and name.
type ownerRef struct{ kind, name string }

// stripOwned keeps only the identity and the controller reference of a
// ReplicaSet or Job: all the Index needs to climb to a Deployment or CronJob.
func stripOwned(newObj func(metav1.ObjectMeta) any) func(any) (any, error) {
	return func(obj any) (any, error) {
		m, ok := obj.(metav1.Object)
		if !ok {
			return obj, nil
		}
		meta := metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion()}
		for _, o := range m.GetOwnerReferences() {
			if o.Controller != nil && *o.Controller {
				meta.OwnerReferences = []metav1.OwnerReference{{Kind: o.Kind, Name: o.Name, APIVersion: o.APIVersion, UID: o.UID, Controller: o.Controller}}
				break
			}
		}
		return newObj(meta), nil
	}
}

func (ix *Index) upsertOwned(kind string, m metav1.Object) {
	ref := objectRef{kind, m.GetNamespace(), m.GetName()}
	var owner ownerRef
	if c := metav1.GetControllerOfNoCopy(m); c != nil {
		owner = ownerRef{c.Kind, c.Name}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if owner.kind == "" {
		delete(ix.owners, ref)
		return
	}
	ix.owners[ref] = owner
}

func (ix *Index) deleteOwned(kind, namespace, name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	delete(ix.owners, objectRef{kind, namespace, name})
}

// workload names a Pod's workload: the Deployment of its ReplicaSet, the
// CronJob of its Job, else its own controller (StatefulSet, DaemonSet, Job,
// a ReplicaSet without Deployment, ...).
func (ix *Index) workload(p *pod) (kind, name string) {
	switch p.owner.kind {
	case "ReplicaSet", "Job":
		if up, ok := ix.owners[objectRef{p.owner.kind, p.namespace, p.owner.name}]; ok {
			return up.kind, up.name
		}
	}
	return p.owner.kind, p.owner.name
}
