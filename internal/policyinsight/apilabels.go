package policyinsight

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// APILabels are the labels ResolveLabels took from the API server for the
// workloads none of whose records carry labels (k8s_flow's pod_labels off,
// as shipped).
type APILabels struct {
	// Selectors holds, by workload (Endpoint.Workload()), the labels that
	// select its Pods: its controller's selector matchLabels (else its Pod
	// template's labels), or a bare Pod's labels, without the volatile
	// ones. Recommend selects the workload by them.
	Selectors map[string]map[string]string
	// Missing holds, by workload, why none were found ("the API server has
	// no deployments.apps shop/web now"); its connections keep no labels
	// (undetermined where a selector must match them).
	Missing map[string]string
}

// ResolveLabels returns rec with labels from the API server on the Pod ends
// of the workloads none of whose records carry labels: the workload's
// labels as they stand now, not as they were when the connections ran.
// Recorded labels win: a workload with any labelled record is left as it
// is. A workload the API server does not have (or does not show the
// caller: get on its kind in its Namespace) is in Missing, not an error.
func ResolveLabels(ctx context.Context, kube kubernetes.Interface, rec *Recording) (*Recording, *APILabels) {
	labelled := map[string]bool{}
	for _, f := range rec.Flows() {
		for _, e := range []*Endpoint{f.Source, f.Destination} {
			if e.Kind == flowrecord.EndpointPod && LabelsOf(e) != nil {
				labelled[e.Workload()] = true
			}
		}
	}
	out := &APILabels{Selectors: map[string]map[string]string{}, Missing: map[string]string{}}
	podLabels := map[string]string{} // workload -> JSON of its Pods' labels
	fill := func(e Endpoint) Endpoint {
		if e.Kind != flowrecord.EndpointPod || labelled[e.Workload()] {
			return e
		}
		k := e.Workload()
		if _, done := podLabels[k]; !done {
			if _, missed := out.Missing[k]; !missed {
				sel, pod, err := workloadLabels(ctx, kube, &e)
				if err != nil {
					out.Missing[k] = err.Error()
				} else {
					b, _ := json.Marshal(pod)
					podLabels[k], out.Selectors[k] = string(b), sel
				}
			}
		}
		if l, ok := podLabels[k]; ok {
			e.Labels = l
		}
		return e
	}
	r := &Recording{}
	for _, f := range rec.Flows() {
		r.Add(fill(*f.Source), fill(*f.Destination), f.Protocol, f.Port, f.Connections, f.First, f.Last)
	}
	return r, out
}

// resources are the API resources of the workload kinds k8s_flow records
// (what RBAC names).
var resources = map[string]string{
	"Deployment": "deployments.apps", "ReplicaSet": "replicasets.apps", "StatefulSet": "statefulsets.apps",
	"DaemonSet": "daemonsets.apps", "Job": "jobs.batch", "CronJob": "cronjobs.batch",
}

// workloadLabels reads e's workload from the API server: the labels that
// select its Pods (without the volatile ones) and the labels its Pods have.
func workloadLabels(ctx context.Context, kube kubernetes.Interface, e *Endpoint) (selector, pod map[string]string, err error) {
	ns, name := e.Namespace, e.WorkloadName
	apps, batch := kube.AppsV1(), kube.BatchV1()
	var sel *metav1.LabelSelector
	var template map[string]string
	switch kind := e.WorkloadKind; {
	case e.WorkloadName == "": // a Pod without an owner (as Endpoint.Workload)
		p, err := kube.CoreV1().Pods(ns).Get(ctx, e.Pod, metav1.GetOptions{})
		if err != nil {
			return nil, nil, apiError(err, "pods", ns, e.Pod)
		}
		return withoutVolatile(maps.Clone(p.Labels)), p.Labels, nil
	case kind == "Deployment":
		sel, template, err = get(ctx, apps.Deployments(ns).Get, name, func(o *appsv1.Deployment) (*metav1.LabelSelector, map[string]string) {
			return o.Spec.Selector, o.Spec.Template.Labels
		})
	case kind == "ReplicaSet":
		sel, template, err = get(ctx, apps.ReplicaSets(ns).Get, name, func(o *appsv1.ReplicaSet) (*metav1.LabelSelector, map[string]string) {
			return o.Spec.Selector, o.Spec.Template.Labels
		})
	case kind == "StatefulSet":
		sel, template, err = get(ctx, apps.StatefulSets(ns).Get, name, func(o *appsv1.StatefulSet) (*metav1.LabelSelector, map[string]string) {
			return o.Spec.Selector, o.Spec.Template.Labels
		})
	case kind == "DaemonSet":
		sel, template, err = get(ctx, apps.DaemonSets(ns).Get, name, func(o *appsv1.DaemonSet) (*metav1.LabelSelector, map[string]string) {
			return o.Spec.Selector, o.Spec.Template.Labels
		})
	case kind == "Job":
		sel, template, err = get(ctx, batch.Jobs(ns).Get, name, func(o *batchv1.Job) (*metav1.LabelSelector, map[string]string) {
			return o.Spec.Selector, o.Spec.Template.Labels
		})
	case kind == "CronJob":
		sel, template, err = get(ctx, batch.CronJobs(ns).Get, name, func(o *batchv1.CronJob) (*metav1.LabelSelector, map[string]string) {
			return o.Spec.JobTemplate.Spec.Selector, o.Spec.JobTemplate.Spec.Template.Labels
		})
	default:
		return nil, nil, fmt.Errorf("its kind %s is not one flowtel reads labels of", e.WorkloadKind)
	}
	if err != nil {
		return nil, nil, apiError(err, resources[e.WorkloadKind], ns, name)
	}
	pod = maps.Clone(template)
	if pod == nil {
		pod = map[string]string{}
	}
	if sel != nil {
		selector = withoutVolatile(maps.Clone(sel.MatchLabels))
		maps.Copy(pod, sel.MatchLabels)
	}
	if len(selector) == 0 {
		selector = withoutVolatile(maps.Clone(template))
	}
	return selector, pod, nil
}

func withoutVolatile(l map[string]string) map[string]string {
	maps.DeleteFunc(l, func(k, _ string) bool { return volatileLabels[k] })
	return l
}

// apiError says why the API server gave no labels of a workload.
func apiError(err error, resource, ns, name string) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the API server has no %s %s/%s now", resource, ns, name)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("reading %s %s/%s is forbidden (flowctl needs get on %s in %s)", resource, ns, name, resource, ns)
	}
	return fmt.Errorf("reading %s %s/%s: %w", resource, ns, name, err)
}

// Note is what a workload's missing labels mean, consequence describing
// it ("no policy selects it"); "" when it has labels.
func (a *APILabels) Note(workload, consequence string) string {
	if a == nil || a.Missing[workload] == "" {
		return ""
	}
	return fmt.Sprintf("%s: no labels recorded, and %s: %s (k8s_flow's pod_labels: true records them)", workload, a.Missing[workload], consequence)
}

// get reads one object and picks its Pod selector and template labels.
func get[T any](ctx context.Context, read func(context.Context, string, metav1.GetOptions) (T, error), name string,
	pick func(T) (*metav1.LabelSelector, map[string]string)) (*metav1.LabelSelector, map[string]string, error) {
	o, err := read(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	sel, template := pick(o)
	return sel, template, nil
}
