package policyinsight

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"
	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
)

// Load lists the cluster's Namespaces and NetworkPolicies, and its
// AdminNetworkPolicies and BaselineAdminNetworkPolicies when the API server
// serves them (policies may be nil: a cluster without the network-policy-api).
func Load(ctx context.Context, kube kubernetes.Interface, policies policyclient.Interface) (*Snapshot, error) {
	s := &Snapshot{}
	nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		s.SetNamespace(ns.Name, ns.Labels)
	}
	nps, err := kube.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing NetworkPolicies: %w", err)
	}
	for i := range nps.Items {
		s.SetNetworkPolicy(&nps.Items[i])
	}
	if policies == nil {
		return s, nil
	}
	served, err := servesAdminPolicies(kube.Discovery())
	if err != nil || !served {
		return s, err
	}
	anps, err := policies.PolicyV1alpha1().AdminNetworkPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing AdminNetworkPolicies: %w", err)
	}
	for i := range anps.Items {
		s.SetAdminPolicy(&anps.Items[i])
	}
	banps, err := policies.PolicyV1alpha1().BaselineAdminNetworkPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing BaselineAdminNetworkPolicies: %w", err)
	}
	for i := range banps.Items {
		s.SetBaselinePolicy(&banps.Items[i])
	}
	return s, nil
}

// servesAdminPolicies reports whether discovery lists the network-policy-api.
func servesAdminPolicies(d discovery.DiscoveryInterface) (bool, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return false, fmt.Errorf("discovery: %w", err)
	}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			if v.GroupVersion == v1alpha1.GroupVersion.String() {
				return true, nil
			}
		}
	}
	return false, nil
}
