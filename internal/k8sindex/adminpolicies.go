package k8sindex

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"
	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
	policyinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"

	"github.com/flowtel/flowtel/internal/netpol"
)

// adminPolicyGroupVersion is the network-policy-api version watched.
const adminPolicyGroupVersion = "policy.networking.k8s.io/v1alpha1"

// discoveryTimeout bounds the discovery of the network-policy-api.
const discoveryTimeout = 10 * time.Second

// servedAdminPolicies asks discovery which of AdminPolicyWatched the API
// server serves (every authenticated user may). Not served, a client
// without a REST connection (a fake) or a failed discovery: none, and
// NetworkPolicies alone are evaluated (a failure is logged).
func (in *Informers) servedAdminPolicies() []Resource {
	rc, ok := in.client.Discovery().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil || rc.Client == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), discoveryTimeout)
	defer cancel()
	raw, err := rc.Get().AbsPath("/apis", adminPolicyGroupVersion).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		if !apierrors.IsNotFound(err) {
			in.logger.Warn("Kubernetes discovery of the AdminNetworkPolicy API failed; evaluating NetworkPolicies only",
				zap.String("groupVersion", adminPolicyGroupVersion), zap.Error(err))
		}
		return nil
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		in.logger.Warn("Kubernetes discovery of the AdminNetworkPolicy API answered garbage; evaluating NetworkPolicies only", zap.Error(err))
		return nil
	}
	var served []Resource
	for _, res := range AdminPolicyWatched {
		if slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == res.Resource }) {
			served = append(served, res)
		}
	}
	return served
}

// newPolicyClient is a network-policy-api clientset on the connection
// (credentials, TLS, user agent) of in.client; CRDs speak JSON only.
func (in *Informers) newPolicyClient() (policyclient.Interface, error) {
	rc, ok := in.client.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil || rc.Client == nil {
		return nil, errors.New("the Kubernetes client has no REST connection")
	}
	u := rc.Get().URL() // <host>[<prefix>]/api/v1
	host := u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/api/v1")
	return policyclient.NewForConfigAndClient(&rest.Config{Host: host}, rc.Client)
}

// adminPolicyWirings are the informers of the served AdminPolicyWatched
// (none when the cluster does not serve them); it sets in.policyFactory.
func (in *Informers) adminPolicyWirings() []wiring {
	served := in.servedAdminPolicies()
	if len(served) == 0 {
		return nil
	}
	client, err := in.newPolicyClient()
	if err != nil {
		in.logger.Warn("cannot build the AdminNetworkPolicy client; evaluating NetworkPolicies only", zap.Error(err))
		return nil
	}
	in.policyClient = client
	in.policyFactory = policyinformers.NewSharedInformerFactory(client, 0)
	ix := in.ix
	api := in.policyFactory.Policy().V1alpha1()
	var out []wiring
	for _, res := range served {
		switch res {
		case AdminPolicyWatched[0]:
			out = append(out, clusterPolicyWiring(ix, res, api.AdminNetworkPolicies().Informer(), adminKey, netpol.FromAdmin))
		case AdminPolicyWatched[1]:
			out = append(out, clusterPolicyWiring(ix, res, api.BaselineAdminNetworkPolicies().Informer(), baselineKey, netpol.FromBaseline))
		}
	}
	in.watched = append(in.watched, served...)
	return out
}

// clusterPolicyWiring wires the informer of one cluster-scoped policy kind:
// its objects, converted by convert, are kept under key.
func clusterPolicyWiring[P metav1.Object](ix *Index, res Resource, informer cache.SharedIndexInformer, key string, convert func(P) *netpol.Policy) wiring {
	return wiring{res, informer, stripClusterPolicy,
		func(o any) { p := o.(P); ix.upsertPolicyAt(key, p, convert(p)) },
		func(o any) { ix.deletePolicy(key, string(o.(P).GetUID())) }}
}

// stripClusterPolicy drops managed fields, annotations and status.
func stripClusterPolicy(obj any) (any, error) {
	switch p := obj.(type) {
	case *v1alpha1.AdminNetworkPolicy:
		p.ManagedFields, p.Annotations, p.Status = nil, nil, v1alpha1.AdminNetworkPolicyStatus{}
	case *v1alpha1.BaselineAdminNetworkPolicy:
		p.ManagedFields, p.Annotations, p.Status = nil, nil, v1alpha1.BaselineAdminNetworkPolicyStatus{}
	}
	return obj, nil
}

// listAdminPolicy lists one object of a served AdminPolicyWatched resource.
func (in *Informers) listAdminPolicy(ctx context.Context, res Resource, opts metav1.ListOptions) error {
	var err error
	switch res {
	case AdminPolicyWatched[0]:
		_, err = in.policyClient.PolicyV1alpha1().AdminNetworkPolicies().List(ctx, opts)
	case AdminPolicyWatched[1]:
		_, err = in.policyClient.PolicyV1alpha1().BaselineAdminNetworkPolicies().List(ctx, opts)
	}
	return err
}
