package policyinsight

import (
	"encoding/json"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// pod is a recorded Pod end: workload "" for a bare Pod; labels as key=value pairs.
func pod(ns, workloadKind, workload, name, addr string, labels ...string) Endpoint {
	l := map[string]string{}
	for _, kv := range labels {
		k, v, _ := strings.Cut(kv, "=")
		l[k] = v
	}
	b, _ := json.Marshal(l)
	return Endpoint{Kind: flowrecord.EndpointPod, Address: netip.MustParseAddr(addr), Namespace: ns, Pod: name,
		WorkloadKind: workloadKind, WorkloadName: workload, Node: "node-1", Labels: string(b)}
}

func node(name, addr string) Endpoint {
	return Endpoint{Kind: flowrecord.EndpointNode, Address: netip.MustParseAddr(addr), Node: name}
}

func external(addr string) Endpoint {
	return Endpoint{Kind: flowrecord.EndpointExternal, Address: netip.MustParseAddr(addr)}
}

// The shop: web (two ReplicaSets, so pod-template-hash and the version
// label churn) receives from the Internet and the kubelet and calls api;
// api calls db in Namespace data, an external API and DNS; a batch Job ran
// for a minute.
var (
	web1    = pod("shop", "Deployment", "web", "web-6f-a", "10.0.1.10", "app=web", "tier=front", "pod-template-hash=6f", "version=1")
	web2    = pod("shop", "Deployment", "web", "web-7c-b", "10.0.1.11", "app=web", "tier=front", "pod-template-hash=7c", "version=2")
	api     = pod("shop", "Deployment", "api", "api-5d-a", "10.0.1.20", "app=api", "pod-template-hash=5d")
	batch   = pod("shop", "Job", "report", "report-x", "10.0.1.30", "job=report", "batch.kubernetes.io/controller-uid=u1")
	db      = pod("data", "StatefulSet", "db", "db-0", "10.0.2.10", "app=db", "statefulset.kubernetes.io/pod-name=db-0")
	coredns = pod("kube-system", "Deployment", "coredns", "coredns-1", "10.0.0.53", "k8s-app=kube-dns")
	kubelet = node("node-1", "192.168.0.11")
	visitor = external("198.51.100.7")
	payAPI  = external("203.0.113.9")
)

const (
	tcp = 6
	udp = 17
)

// shopFlows is a day of the shop's connections.
func shopFlows() *Recording {
	r := &Recording{}
	add := func(src, dst Endpoint, proto uint8, port uint16, n uint64, from, to time.Duration) {
		r.Add(src, dst, proto, port, n, t0.Add(from), t0.Add(to))
	}
	add(visitor, web1, tcp, 8080, 40, 0, 24*time.Hour)
	add(visitor, web2, tcp, 8080, 60, time.Hour, 24*time.Hour)
	add(kubelet, web1, tcp, 8081, 100, 0, 24*time.Hour)
	add(web1, api, tcp, 9000, 500, 0, 12*time.Hour)
	add(web2, api, tcp, 9000, 700, 12*time.Hour, 24*time.Hour)
	add(api, db, tcp, 5432, 300, 0, 24*time.Hour)
	add(api, payAPI, tcp, 443, 20, 0, 24*time.Hour)
	add(api, coredns, udp, 53, 900, 0, 24*time.Hour)
	add(batch, db, tcp, 5432, 1, 3*time.Hour, 3*time.Hour+time.Minute)
	return r
}

// shopCluster is the cluster before any draft: Namespaces, no policies.
func shopCluster() *Snapshot {
	s := &Snapshot{}
	for _, ns := range []string{"shop", "data", "kube-system"} {
		s.SetNamespace(ns, map[string]string{NamespaceNameLabel: ns, "team": ns})
	}
	return s
}

func parseDraft(t *testing.T, y string) *Draft {
	t.Helper()
	d, err := ParseDraft(strings.NewReader(y), "shop")
	require.NoError(t, err)
	return d
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
