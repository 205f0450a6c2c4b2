// Package cluster registers a netlab mini-cluster with a real kube-apiserver:
// the Node objects (podCIDRs, InternalIPs), the Pods (nodeName; IPs and phase
// Running set through the status subresource, as the kubelet does), and the
// Services with their EndpointSlices (as the EndpointSlice controller would).
package cluster

import (
	"context"
	"fmt"

	"github.com/flowtel/flowtel/testbed/netlab"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// RegisterNodes creates a Node object per netlab Node.
func RegisterNodes(ctx context.Context, c kubernetes.Interface, lab *netlab.Lab) error {
	for _, n := range lab.Nodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{"kubernetes.io/hostname": n.Name}},
			Spec: corev1.NodeSpec{
				PodCIDR:  n.PodCIDRv4.String(),
				PodCIDRs: []string{n.PodCIDRv4.String(), n.PodCIDRv6.String()},
			},
		}
		created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
		created.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: n.TransportV4.String()},
			{Type: corev1.NodeInternalIP, Address: n.TransportV6.String()},
			{Type: corev1.NodeHostName, Address: n.Name},
		}
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", n.Name, err)
		}
	}
	return nil
}

// RegisterPod creates the Pod object of a netlab Pod, running on its Node with its IPs.
func RegisterPod(ctx context.Context, c kubernetes.Interface, p *netlab.Pod, labels map[string]string) error {
	if err := CreatePod(ctx, c, p, labels); err != nil {
		return err
	}
	return SetPodIPs(ctx, c, p)
}

// CreatePod creates the Pod object scheduled to its Node, with no IPs in its
// status yet: what the API holds before the kubelet's first status update.
func CreatePod(ctx context.Context, c kubernetes.Interface, p *netlab.Pod, labels map[string]string) error {
	if err := ensureNamespace(ctx, c, p.Namespace); err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:   p.Node.Name,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/flowpeer:test"}},
		},
	}
	if _, err := c.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// SetPodIPs writes the Pod's status as the kubelet would: running, with its IPs.
func SetPodIPs(ctx context.Context, c kubernetes.Interface, p *netlab.Pod) error {
	created, err := c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	created.Status.Phase = corev1.PodRunning
	created.Status.PodIP = p.IPv4.String()
	created.Status.PodIPs = []corev1.PodIP{{IP: p.IPv4.String()}, {IP: p.IPv6.String()}}
	created.Status.HostIP = p.Node.TransportV4.String()
	now := metav1.Now()
	created.Status.StartTime = &now
	if _, err := c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pod %s/%s status: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// RegisterService creates a netlab Service's Service object (ClusterIPs as
// netlab programmed them, NodePort if any) and one EndpointSlice per family.
func RegisterService(ctx context.Context, c kubernetes.Interface, s *netlab.Service, portName string) error {
	if err := ensureNamespace(ctx, c, s.Namespace); err != nil {
		return err
	}
	proto := corev1.ProtocolTCP
	if s.Protocol == "udp" {
		proto = corev1.ProtocolUDP
	}
	svcType := corev1.ServiceTypeClusterIP
	etp := corev1.ServiceExternalTrafficPolicy("")
	if s.NodePort != 0 {
		svcType = corev1.ServiceTypeNodePort
		etp = corev1.ServiceExternalTrafficPolicyCluster
		if s.ExternalTrafficPolicyLocal {
			etp = corev1.ServiceExternalTrafficPolicyLocal
		}
	}
	dual := corev1.IPFamilyPolicyRequireDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
		Spec: corev1.ServiceSpec{
			Type:                  svcType,
			ClusterIP:             s.ClusterIPv4.String(),
			ClusterIPs:            []string{s.ClusterIPv4.String(), s.ClusterIPv6.String()},
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			IPFamilyPolicy:        &dual,
			ExternalTrafficPolicy: etp,
			Ports: []corev1.ServicePort{{Name: portName, Protocol: proto, Port: int32(s.Port),
				TargetPort: intstr.FromInt32(int32(s.TargetPort)), NodePort: int32(s.NodePort)}},
		},
	}
	created, err := c.CoreV1().Services(s.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create service %s/%s: %w", s.Namespace, s.Name, err)
	}
	for _, fam := range []struct {
		suffix string
		typ    discoveryv1.AddressType
		addr   func(*netlab.Pod) string
	}{
		{"v4", discoveryv1.AddressTypeIPv4, func(p *netlab.Pod) string { return p.IPv4.String() }},
		{"v6", discoveryv1.AddressTypeIPv6, func(p *netlab.Pod) string { return p.IPv6.String() }},
	} {
		port := int32(s.TargetPort)
		name := portName
		ready := true
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name + "-" + fam.suffix,
				Labels:          map[string]string{discoveryv1.LabelServiceName: s.Name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: s.Name, UID: created.UID}}},
			AddressType: fam.typ,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
		}
		for _, ep := range s.Endpoints {
			nodeName := ep.Node.Name
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fam.addr(ep)},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				NodeName:   &nodeName,
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ep.Namespace, Name: ep.Name},
			})
		}
		if _, err := c.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create endpointslice %s/%s: %w", s.Namespace, slice.Name, err)
		}
	}
	return nil
}

func ensureNamespace(ctx context.Context, c kubernetes.Interface, name string) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
