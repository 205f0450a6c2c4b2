//go:build integration

package main

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestPolicyWhatIfFollow: what-if --follow on a real flow stream (the
// flow_stream exporter and kube-apiserver): a draft that lets only web
// reach db prints client's call to db from the history, once however often
// it is exported, then a live one on another port as it comes, not web's;
// interrupted, it fails for the denials.
func TestPolicyWhatIfFollow(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	_, err := e.cp.Admin.NetworkingV1().NetworkPolicies("default").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web-in"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	draft := writeFile(t, "draft.yaml", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db-from-web}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress: [{from: [{podSelector: {matchLabels: {app: web}}}]}]
`)
	pod := func(name, addr string) flowrecord.Endpoint {
		return flowrecord.Endpoint{Address: netip.MustParseAddr(addr), Kind: flowrecord.EndpointPod, Namespace: "default", PodName: name + "-1",
			PodLabels: map[string]string{"app": name}, NodeName: "node-1"}
	}
	client, web, db := pod("client", "10.244.1.2"), pod("web", "10.244.1.3"), pod("db", "10.244.1.4")
	conn := func(src, dst flowrecord.Endpoint, sport, port uint16) *flowrecord.Record {
		src.Port, dst.Port = sport, port
		now := time.Now()
		r := &flowrecord.Record{Start: now.Add(-time.Second), End: now, Observed: now, Protocol: 6, Source: src, Destination: dst,
			Stats: flowrecord.Counters{PacketTotal: 1, OctetTotal: 60}, Reporter: flowrecord.Reporter{NodeName: "node-1", Side: flowrecord.SideBoth}}
		r.Key = r.CorrelationKey()
		return r
	}
	e.push(t, conn(client, web, 40001, 8080), conn(client, db, 40002, 5432), conn(client, db, 40002, 5432), conn(client, db, 40003, 5432))

	kc := e.cp.Kubeconfig(t, "admin", e.cp.AdminToken)
	o := startObserver(t, "policy", "what-if", "-f", draft, "--follow", "--cluster-wide", "--kubeconfig", kc, "--stream-server", e.addr, "--ca-file", e.ca)
	assert.Equal(t, []string{
		"CHANGE  SOURCE  DESTINATION  PORT  DECIDED BY",
		"admitted -> denied  default/Pod/client-1  default/Pod/db-1  TCP/5432  ingress: NetworkPolicy default/db-from-web (no rule admits it)",
	}, o.next(t, 2))

	e.push(t, conn(web, db, 40004, 5432), conn(client, db, 40005, 5432), conn(client, db, 40006, 5433))
	assert.Equal(t, []string{
		"admitted -> denied  default/Pod/client-1  default/Pod/db-1  TCP/5433  ingress: NetworkPolicy default/db-from-web (no rule admits it)",
	}, o.next(t, 1), "only the new port: web's call is admitted, client's to 5432 was printed")

	o.cancel()
	<-o.done
	assert.Equal(t, 1, o.code)
	assert.Contains(t, o.stderr.String(), "the draft would deny 2 flows the cluster's policies admit")
}
