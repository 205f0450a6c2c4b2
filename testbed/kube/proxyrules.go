package kube

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// WaitServiceRules waits until every Node's kube-proxy has written the NAT
// rules of every Service in namespace for each of its Ready Pods.
//
// A Pod being Ready is not enough to reach it through its Service: the
// EndpointSlice controller adds it afterwards and each kube-proxy writes its
// rules after that, at its own pace. Until then a connection to the ClusterIP
// or a NodePort is refused (kube-proxy rejects Services without endpoints).
// Waiting on the rules themselves, read from each Node's kernel, makes no
// connection, so a test's flow records hold only its own connections.
func (c *Cluster) WaitServiceRules(ctx context.Context, namespace string) error {
	var missing []string
	for {
		var err error
		missing, err = c.missingServiceRules(ctx, namespace)
		if err == nil && len(missing) == 0 {
			return nil
		}
		if err != nil {
			missing = append(missing, err.Error())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube: Service rules of namespace %s not written: %s", namespace, strings.Join(missing, "; "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// missingServiceRules lists what is not there yet: a Ready Pod not in its
// Service's EndpointSlices, or an endpoint a Node's rules do not name.
func (c *Cluster) missingServiceRules(ctx context.Context, namespace string) ([]string, error) {
	services, err := c.Admin.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := c.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var missing, endpoints []string
	for _, svc := range services.Items {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		slices, err := c.Admin.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name,
		})
		if err != nil {
			return nil, err
		}
		ready := map[string]bool{}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
					continue
				}
				for _, addr := range ep.Addresses {
					ready[addr] = true
					for _, p := range s.Ports {
						if p.Port != nil {
							endpoints = append(endpoints, net.JoinHostPort(addr, strconv.Itoa(int(*p.Port))))
						}
					}
				}
			}
		}
		selector := labels.SelectorFromSet(svc.Spec.Selector)
		for _, p := range pods.Items {
			if selector.Matches(labels.Set(p.Labels)) && podReady(&p) && p.Status.PodIP != "" && !ready[p.Status.PodIP] {
				missing = append(missing, fmt.Sprintf("Pod %s not yet a ready endpoint of Service %s", p.Name, svc.Name))
			}
		}
	}
	for _, n := range c.Nodes {
		rules, err := n.proxyRules(ctx, c.opts.ProxyMode)
		if err != nil {
			return nil, err
		}
		for _, ep := range endpoints {
			if !strings.Contains(rules, ep) {
				missing = append(missing, fmt.Sprintf("%s's kube-proxy has no rule for endpoint %s", n.Name, ep))
			}
		}
	}
	return missing, nil
}

// proxyRules is the text of the NAT rules kube-proxy writes in mode, as the
// Node's kernel holds them; each endpoint appears in it as address:port.
func (n *Node) proxyRules(ctx context.Context, mode string) (string, error) {
	args := []string{"iptables-save", "-t", "nat"}
	if mode == "nftables" {
		args = []string{"nft", "list", "table", "ip", "kube-proxy"}
	}
	out, err := n.Command(ctx, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w: %s", n.Name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
