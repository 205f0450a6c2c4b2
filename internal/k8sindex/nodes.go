package k8sindex

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// node is what the Index keeps of a Node.
type node struct {
	name, uid string
	// addrs are the Node's own addresses: InternalIP, ExternalIP and the
	// gateway (first host) address of each podCIDR (decision D1).
	addrs    []netip.Addr
	podCIDRs []netip.Prefix
}

// StripNode is an informer transform that keeps of a Node what flowtel
// reads (name, UID, podCIDRs, InternalIP/ExternalIP addresses): a Node
// object carries much more (images, conditions).
var StripNode = stripper(keepNode)

func keepNode(in *corev1.Node) *corev1.Node {
	out := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, UID: in.UID, ResourceVersion: in.ResourceVersion},
		Spec:       corev1.NodeSpec{PodCIDR: in.Spec.PodCIDR, PodCIDRs: in.Spec.PodCIDRs},
	}
	for _, a := range in.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			out.Status.Addresses = append(out.Status.Addresses, a)
		}
	}
	return out
}

// GatewayAddress is the first host address of a podCIDR: the address a
// generic CNI gives the Node's side of its Pod network, which host processes
// use as source towards Pods (Antrea issue #8260).
func GatewayAddress(p netip.Prefix) netip.Addr { return p.Masked().Addr().Next() }

func nodeFrom(in *corev1.Node) *node {
	n := &node{name: in.Name, uid: string(in.UID)}
	add := func(a netip.Addr) {
		if a.IsValid() && !slices.Contains(n.addrs, a) {
			n.addrs = append(n.addrs, a)
		}
	}
	for _, a := range in.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			add(ip.Unmap())
		}
	}
	cidrs := in.Spec.PodCIDRs
	if len(cidrs) == 0 && in.Spec.PodCIDR != "" {
		cidrs = []string{in.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			continue
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-unmapBits(p.Addr())).Masked()
		if !slices.Contains(n.podCIDRs, p) {
			n.podCIDRs = append(n.podCIDRs, p)
		}
		add(GatewayAddress(p))
	}
	return n
}

func unmapBits(a netip.Addr) int {
	if a.Is4In6() {
		return 96
	}
	return 0
}

func (ix *Index) upsertNode(in *corev1.Node) {
	n := nodeFrom(in)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeNodeLocked(in.Name)
	ix.nodes[n.name] = n
	for _, a := range n.addrs {
		ix.nodeAddr[a] = n
	}
	for _, p := range n.podCIDRs {
		ix.podCIDR[p] = n
	}
	ix.recountCIDRBitsLocked()
}

func (ix *Index) deleteNode(name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeNodeLocked(name)
	ix.recountCIDRBitsLocked()
}

func (ix *Index) removeNodeLocked(name string) {
	old := ix.nodes[name]
	if old == nil {
		return
	}
	delete(ix.nodes, name)
	mine := func(n *node) bool { return n == old }
	unindex(ix.nodeAddr, old.addrs, mine)
	unindex(ix.podCIDR, old.podCIDRs, mine)
}

// recountCIDRBitsLocked lists the distinct podCIDR prefix lengths per family,
// so a subnet lookup is one map probe per length (usually one).
func (ix *Index) recountCIDRBitsLocked() {
	var bits [2][]int
	for p := range ix.podCIDR {
		f := family(p.Addr())
		if !slices.Contains(bits[f], p.Bits()) {
			bits[f] = append(bits[f], p.Bits())
		}
	}
	ix.cidrBits = bits
}

func family(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// nodeOfPodSubnet returns the Node whose podCIDR contains addr.
func (ix *Index) nodeOfPodSubnet(addr netip.Addr) *node {
	for _, bits := range ix.cidrBits[family(addr)] {
		p, err := addr.Prefix(bits)
		if err != nil {
			continue
		}
		if n := ix.podCIDR[p]; n != nil {
			return n
		}
	}
	return nil
}

// NodeAddresses are a Node's own addresses as decision D1 defines its `node`
// endpoints: its InternalIP and ExternalIP addresses and the gateway (first
// host) address of each of its podCIDRs.
func NodeAddresses(in *corev1.Node) []netip.Addr { return nodeFrom(in).addrs }
