package k8sindex

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServicePort is one port of a Service, as a flow record names it.
type ServicePort struct {
	// PortName is "namespace/name", plus ":port" when the Service port is
	// named (Antrea's destinationServicePortName).
	PortName string
	UID      string
}

// frontKey is a Service front end: ClusterIP, LoadBalancer ingress IP or externalIP.
type frontKey struct {
	addr  netip.Addr
	port  uint16
	proto uint8
}

type nodePortKey struct {
	port  uint16
	proto uint8
}

type service struct {
	fronts    []frontKey
	nodePorts []nodePortKey
}

// ProtocolNumber maps a Kubernetes protocol to its IANA number.
func ProtocolNumber(p corev1.Protocol) uint8 {
	switch p {
	case corev1.ProtocolUDP:
		return 17
	case corev1.ProtocolSCTP:
		return 132
	default: // TCP, and "" which the API server defaults to TCP
		return 6
	}
}

// keepService keeps the addresses, ports and port names.
func keepService(in *corev1.Service) *corev1.Service {
	out := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace, UID: in.UID, ResourceVersion: in.ResourceVersion},
		Spec: corev1.ServiceSpec{
			Type: in.Spec.Type, ClusterIP: in.Spec.ClusterIP, ClusterIPs: in.Spec.ClusterIPs,
			ExternalIPs: in.Spec.ExternalIPs,
		},
	}
	for _, p := range in.Spec.Ports {
		out.Spec.Ports = append(out.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort})
	}
	for _, ing := range in.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ing.IP})
		}
	}
	return out
}

func serviceAddrs(in *corev1.Service) []netip.Addr {
	out := appendAddr(nil, in.Spec.ClusterIP) // "None" (headless) does not parse
	for _, s := range in.Spec.ClusterIPs {
		out = appendAddr(out, s)
	}
	for _, s := range in.Spec.ExternalIPs {
		out = appendAddr(out, s)
	}
	for _, ing := range in.Status.LoadBalancer.Ingress {
		out = appendAddr(out, ing.IP)
	}
	return out
}

func (ix *Index) upsertService(in *corev1.Service) {
	uid := string(in.UID)
	base := in.Namespace + "/" + in.Name
	addrs := serviceAddrs(in)
	s := &service{}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeServiceLocked(uid)
	for _, p := range in.Spec.Ports {
		sp := &ServicePort{PortName: base, UID: uid}
		if p.Name != "" {
			sp.PortName = base + ":" + p.Name
		}
		proto := ProtocolNumber(p.Protocol)
		for _, a := range addrs {
			k := frontKey{a, uint16(p.Port), proto}
			ix.fronts[k] = sp
			s.fronts = append(s.fronts, k)
		}
		if p.NodePort != 0 {
			k := nodePortKey{uint16(p.NodePort), proto}
			ix.nodePort[k] = sp
			s.nodePorts = append(s.nodePorts, k)
		}
	}
	ix.services[uid] = s
}

func (ix *Index) deleteService(uid string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeServiceLocked(uid)
}

func (ix *Index) removeServiceLocked(uid string) {
	s := ix.services[uid]
	if s == nil {
		return
	}
	delete(ix.services, uid)
	mine := func(sp *ServicePort) bool { return sp != nil && sp.UID == uid }
	unindex(ix.fronts, s.fronts, mine)
	unindex(ix.nodePort, s.nodePorts, mine)
}
