//go:build integration

package flowstreamexporter

import (
	"context"
	"encoding/pem"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/controlplane"
)

const flowViewer, identityViewer = "antrea-flow-viewer", "antrea-flow-identity-viewer"

// The records every authorization test streams.
func testRecords() map[string]*flowrecord.Record {
	ab := podRecord("ns-a", "web", "ns-b", "api")
	bc := podRecord("ns-b", "api", "ns-c", "db")
	ext := podRecord("ns-a", "web", "", "")
	ext.Destination = flowrecord.Endpoint{Address: netip.MustParseAddr("203.0.113.9"), Port: 443, Kind: flowrecord.EndpointExternal}
	ext.Service, ext.FlowType, ext.IngressPolicy = flowrecord.Service{}, flowrecord.FlowTypeToExternal, flowrecord.Policy{}
	node := podRecord("", "", "ns-b", "api")
	node.Source = flowrecord.Endpoint{Address: netip.MustParseAddr("192.168.0.13"), Port: 40000, Kind: flowrecord.EndpointNode, NodeName: "node-c", NodeUID: "uid-node-c"}
	node.EgressPolicy = flowrecord.Policy{}
	hosts := podRecord("", "", "", "")
	hosts.Source = node.Source
	hosts.Destination = flowrecord.Endpoint{Address: netip.MustParseAddr("192.168.0.11"), Port: 10250, Kind: flowrecord.EndpointNode, NodeName: "node-a"}
	hosts.Service, hosts.IngressPolicy, hosts.EgressPolicy = flowrecord.Service{}, flowrecord.Policy{}, flowrecord.Policy{}
	denied := podRecord("ns-a", "scanner", "ns-b", "api")
	denied.IngressPolicy.RuleAction = flowrecord.RuleActionDrop
	recs := map[string]*flowrecord.Record{"ab": ab, "bc": bc, "ext": ext, "node": node, "hosts": hosts, "denied": denied}
	for name, r := range recs {
		r.Key = name // flows are told apart by id
	}
	return recs
}

func byID(flows []*pb.Flow) map[string]*pb.Flow {
	m := map[string]*pb.Flow{}
	for _, f := range flows {
		m[f.Id] = f
	}
	return m
}

func ids(flows []*pb.Flow) []string {
	var out []string
	for _, f := range flows {
		out = append(out, f.Id)
	}
	return out
}

func requireCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	require.Equal(t, code, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), msg)
}

// follow opens a following stream and returns a function reading its next
// response (the StreamInfo comes first).
func (c *cluster) follow(t *testing.T, cred credential, req *pb.GetFlowsRequest) func() (*pb.GetFlowsResponse, error) {
	t.Helper()
	req.Follow = true
	ctx, cancel := context.WithCancel(withToken(context.Background(), cred))
	t.Cleanup(cancel)
	s, err := pb.NewFlowStreamServiceClient(c.conn(t, cred)).GetFlows(ctx, req)
	require.NoError(t, err)
	return s.Recv
}

func TestAuthorization(t *testing.T) {
	c := startCluster(t)
	recs := testRecords()
	for _, name := range []string{"ab", "bc", "ext", "node", "hosts", "denied"} {
		c.push(t, recs[name])
	}
	nsA := &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}}
	nsB := &pb.GetFlowsRequest{Namespaces: []string{"ns-b"}}

	t.Run("viewer in ns-a", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "team", "a-viewer", map[string][]string{flowViewer: {"ns-a"}}))
		flows, err := c.open(t, tok, nsA)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"ab", "ext", "denied"}, ids(flows), "either endpoint in ns-a")
		f := byID(flows)
		k := f["ab"].K8S
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_UNSPECIFIED, k.SourceDisclosure)
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, k.DestinationDisclosure)
		assert.Equal(t, "web", k.SourcePodName)
		assert.Equal(t, "node-a", k.SourceNodeName)
		assert.Equal(t, "ns-b", k.DestinationPodNamespace)
		assert.Empty(t, k.DestinationPodName+k.DestinationServicePortName+k.DestinationNodeName)
		assert.Nil(t, f["ab"].Ipfix)
		assert.Empty(t, f["denied"].K8S.DestinationPodNamespace, "denied: the unidentified peer's Namespace is withheld")
		assert.Equal(t, pb.FlowType_FLOW_TYPE_TO_EXTERNAL, f["ext"].K8S.FlowType)

		_, err = c.open(t, tok, nsB)
		requireCode(t, err, codes.PermissionDenied, "may not list flows.observability.antrea.io in Namespace ns-b")
		_, err = c.open(t, tok, &pb.GetFlowsRequest{ClusterWide: true})
		requireCode(t, err, codes.PermissionDenied, "cluster-wide")
	})

	t.Run("identity-viewer in the peer's Namespace", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "team", "a-id-b", map[string][]string{flowViewer: {"ns-a"}, identityViewer: {"ns-b"}}))
		flows, err := c.open(t, tok, nsA)
		require.NoError(t, err)
		k := byID(flows)["ab"].K8S
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY, k.DestinationDisclosure)
		assert.Equal(t, "api", k.DestinationPodName)
		assert.Equal(t, "ns-b/api-svc:http", k.DestinationServicePortName)
		assert.Empty(t, k.DestinationNodeName, "the peer's Node is never named")
		// identity alone opens no stream
		_, err = c.open(t, tok, nsB)
		requireCode(t, err, codes.PermissionDenied, "ns-b")
	})

	t.Run("viewer in both Namespaces", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "team", "a-and-b", map[string][]string{flowViewer: {"ns-a", "ns-b"}}))
		for _, req := range []*pb.GetFlowsRequest{nsA, nsB} {
			flows, err := c.open(t, tok, req)
			require.NoError(t, err)
			f := byID(flows)["ab"]
			assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_UNSPECIFIED, f.K8S.SourceDisclosure)
			assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_UNSPECIFIED, f.K8S.DestinationDisclosure)
			assert.Equal(t, "node-b", f.K8S.DestinationNodeName)
			assert.NotNil(t, f.Ipfix, "both endpoints in full")
		}
	})

	t.Run("list only in the peer's Namespace", func(t *testing.T) {
		createRole(t, c.cp, "ns-b", "flows-list", rbacv1.PolicyRule{APIGroups: []string{DefaultAPIGroup}, Resources: []string{"flows"}, Verbs: []string{"list"}})
		tok := tokenCred(c.serviceAccount(t, "team", "a-list-b", map[string][]string{flowViewer: {"ns-a"}, "Role:flows-list": {"ns-b"}}))
		flows, err := c.open(t, tok, nsA)
		require.NoError(t, err)
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_UNSPECIFIED, byID(flows)["ab"].K8S.DestinationDisclosure, "list covers a history stream")
		next := c.follow(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}})
		resp, err := next()
		require.NoError(t, err)
		require.Equal(t, []string{"ns-a"}, resp.Info.GetAuthorizedNamespaces(), "StreamInfo first")
		resp, err = next()
		require.NoError(t, err)
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, byID(resp.Flows)["ab"].K8S.DestinationDisclosure, "a following stream needs watch")
		// list only on the stream's own Namespace: history yes, follow no
		tok2 := tokenCred(c.serviceAccount(t, "team", "b-list", map[string][]string{"Role:flows-list": {"ns-b"}}))
		_, err = c.open(t, tok2, nsB)
		require.NoError(t, err)
		_, err = c.follow(t, tok2, &pb.GetFlowsRequest{Namespaces: []string{"ns-b"}})()
		requireCode(t, err, codes.PermissionDenied, "may not watch flows")
	})

	t.Run("cluster-wide", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "ops", "all", map[string][]string{flowViewer: {""}}))
		next := c.follow(t, tok, &pb.GetFlowsRequest{ClusterWide: true})
		resp, err := next()
		require.NoError(t, err)
		require.True(t, resp.Info.GetClusterWide())
		resp, err = next()
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"ab", "bc", "ext", "node", "hosts", "denied"}, ids(resp.Flows), "flows with no Namespace too")
		for _, f := range resp.Flows {
			assert.Zero(t, f.K8S.SourceDisclosure)
			assert.Zero(t, f.K8S.DestinationDisclosure)
			assert.NotNil(t, f.Ipfix)
		}
		assert.Equal(t, "node-c", byID(resp.Flows)["node"].K8S.SourceNodeName)
		// A ClusterRoleBinding also discloses every peer in full on a Namespace stream.
		flows, err := c.open(t, tok, nsA)
		require.NoError(t, err)
		assert.Equal(t, "node-b", byID(flows)["ab"].K8S.DestinationNodeName)
	})

	t.Run("wildcard Role", func(t *testing.T) {
		createRole(t, c.cp, "ns-b", "everything", rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}})
		tok := tokenCred(c.serviceAccount(t, "team", "a-wild-b", map[string][]string{flowViewer: {"ns-a"}, "Role:everything": {"ns-b"}}))
		flows, err := c.open(t, tok, nsA)
		require.NoError(t, err)
		k := byID(flows)["ab"].K8S
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_UNSPECIFIED, k.DestinationDisclosure, "a wildcard Role includes flows")
		assert.Equal(t, "node-b", k.DestinationNodeName)
	})

	t.Run("aggregated admin and view", func(t *testing.T) {
		aggregate(t, c.cp)
		tok := tokenCred(c.serviceAccount(t, "team", "admin-a-view-b", map[string][]string{"admin": {"ns-a"}, "view": {"ns-b"}}))
		flows, err := c.open(t, tok, nsA)
		require.NoError(t, err, "admin in ns-a observes ns-a")
		k := byID(flows)["ab"].K8S
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY, k.DestinationDisclosure, "view in ns-b gives the Identity tier")
		assert.Equal(t, "api", k.DestinationPodName)
		_, err = c.open(t, tok, nsB)
		requireCode(t, err, codes.PermissionDenied, "ns-b")
	})

	t.Run("Node endpoint", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "team", "b-viewer", map[string][]string{flowViewer: {"ns-b"}}))
		flows, err := c.open(t, tok, nsB)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"ab", "bc", "node", "denied"}, ids(flows))
		k := byID(flows)["node"].K8S
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, k.SourceDisclosure, "a Node has no Namespace: Flow tier")
		assert.Empty(t, k.SourceNodeName+k.SourceNodeUid)
		assert.Equal(t, []byte{192, 168, 0, 13}, byID(flows)["node"].Ip.Source)
		assert.Equal(t, "ns-b", byID(flows)["denied"].K8S.DestinationPodNamespace, "the stream's own endpoint keeps its Namespace")
		assert.Empty(t, byID(flows)["denied"].K8S.SourcePodNamespace, "the denied peer's Namespace is withheld")
	})

	t.Run("invalid arguments", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "team", "args", map[string][]string{flowViewer: {"ns-a"}}))
		_, err := c.open(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a", "ns-b"}})
		requireCode(t, err, codes.InvalidArgument, "namespaces: exactly one Namespace")
		_, err = c.open(t, tok, &pb.GetFlowsRequest{})
		requireCode(t, err, codes.InvalidArgument, "namespaces: one Namespace is required")
		_, err = c.open(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Filters: []*pb.FlowFilter{{
			Direction: pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_FROM, ServiceNames: []string{"api-svc"}}}})
		requireCode(t, err, codes.InvalidArgument, "filters[0].service_names")
	})

	t.Run("filters see what the client sees", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "team", "probe-names", map[string][]string{flowViewer: {"ns-a"}}))
		// api is a Flow-tier peer on ns-a's stream: filtering on its name must not find it.
		flows, err := c.open(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Filters: []*pb.FlowFilter{{PodNames: []string{"api"}}}})
		require.NoError(t, err)
		require.Empty(t, flows)
	})
}

func createRole(t *testing.T, cp *controlplane.ControlPlane, ns, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	_, err := cp.Admin.RbacV1().Roles(ns).Create(context.Background(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// aggregate does what the controller manager's aggregation controller would
// (the test control plane has none): the shipped roles' rules go into admin
// and view, following their aggregate-to-* labels.
func aggregate(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	for _, target := range []string{"admin", "view"} {
		role, err := cp.Admin.RbacV1().ClusterRoles().Get(ctx, target, metav1.GetOptions{})
		require.NoError(t, err)
		for _, shipped := range []string{flowViewer, identityViewer} {
			s, err := cp.Admin.RbacV1().ClusterRoles().Get(ctx, shipped, metav1.GetOptions{})
			require.NoError(t, err)
			if s.Labels["rbac.authorization.k8s.io/aggregate-to-"+target] == "true" {
				role.Rules = append(role.Rules, s.Rules...)
			}
		}
		role.AggregationRule = nil
		_, err = cp.Admin.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

func TestAuthentication(t *testing.T) {
	c := startCluster(t)
	c.push(t, testRecords()["ab"])
	nsA := &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}}
	good := tokenCred(c.serviceAccount(t, "team", "reader", map[string][]string{flowViewer: {"ns-a"}}))
	noAccess := c.serviceAccount(t, "team", "nobody", nil)

	_, err := c.open(t, credential{}, nsA)
	requireCode(t, err, codes.Unauthenticated, "no credential")
	_, err = c.open(t, tokenCred("bogus"), nsA)
	requireCode(t, err, codes.Unauthenticated, "token rejected")
	// Unauthenticated comes before the request is looked at.
	_, err = c.open(t, tokenCred("bogus"), &pb.GetFlowsRequest{})
	requireCode(t, err, codes.Unauthenticated, "token rejected")

	c.bind(t, "ns-a", flowViewer, rbacv1.Subject{Kind: "User", Name: "alice"})
	alice := c.cp.ClientCertificate(t, "alice", "devs")
	flows, err := c.open(t, certCred(alice), nsA)
	require.NoError(t, err, "client certificate signed by the cluster's client CA")
	require.Len(t, flows, 1)
	// Groups come from the certificate's Organizations.
	c.bind(t, "ns-b", flowViewer, rbacv1.Subject{Kind: "Group", Name: "devs"})
	_, err = c.open(t, certCred(c.cp.ClientCertificate(t, "bob", "devs")), &pb.GetFlowsRequest{Namespaces: []string{"ns-b"}})
	require.NoError(t, err)

	// Certificate first: alice's certificate with a token that has no access.
	_, err = c.open(t, credential{cert: &alice, token: noAccess}, nsA)
	require.NoError(t, err)
	// ... and a certificate of a user without access wins over a good token.
	carol := c.cp.ClientCertificate(t, "carol")
	_, err = c.open(t, credential{cert: &carol, token: good.token}, nsA)
	requireCode(t, err, codes.PermissionDenied, `user "carol"`)

	// A certificate from another CA: unauthenticated alone, the token is tried next.
	otherCP := controlplane.Start(t)
	other := otherCP.ClientCertificate(t, "alice")
	_, err = c.open(t, certCred(other), nsA)
	requireCode(t, err, codes.Unauthenticated, "client certificate")
	_, err = c.open(t, credential{cert: &other, token: good.token}, nsA)
	require.NoError(t, err)

	// The bundle is reloaded when the ConfigMap changes: add the other CA.
	cms := c.cp.Admin.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(context.Background(), "extension-apiserver-authentication", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["client-ca-file"] += string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: otherCP.ClientCA.Raw}))
	_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.open(t, certCred(other), nsA)
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "a certificate of the CA added to the bundle")

	t.Run("Antrea's method name", func(t *testing.T) {
		conn := c.conn(t, good)
		ctx := withToken(context.Background(), good)
		s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/antrea_io.antrea.pkg.apis.flow.v1alpha1.FlowStreamService/GetFlows")
		require.NoError(t, err)
		require.NoError(t, s.SendMsg(nsA))
		require.NoError(t, s.CloseSend())
		var info, data pb.GetFlowsResponse
		require.NoError(t, s.RecvMsg(&info))
		require.Equal(t, []string{"ns-a"}, info.Info.GetAuthorizedNamespaces())
		require.NoError(t, s.RecvMsg(&data))
		require.Len(t, data.Flows, 1)
		require.Equal(t, "web", data.Flows[0].K8S.SourcePodName)
	})

	t.Run("client CA not loaded", func(t *testing.T) {
		c2 := &cluster{cp: c.cp}
		c2.startExporter(t, false)
		_, err := c2.open(t, certCred(alice), nsA)
		requireCode(t, err, codes.Unavailable, "client CA bundle not loaded")
		_, err = c2.open(t, good, nsA)
		require.NoError(t, err, "tokens still work")
	})
}

func TestEstablishedStreams(t *testing.T) {
	c := startCluster(t, func(cfg *Config) {
		cfg.Kubernetes.DecisionTTL = time.Second
		cfg.Kubernetes.RecheckInterval = 300 * time.Millisecond
		cfg.Limits = LimitsConfig{MaxStreams: 3, MaxStreamsPerClient: 2}
	})
	c.push(t, testRecords()["ab"])
	nsA := func() *pb.GetFlowsRequest { return &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}} }

	t.Run("a revoked binding ends the stream", func(t *testing.T) {
		tok := c.cp.ServiceAccount(t, "team", "revoked")
		binding := c.bind(t, "ns-a", flowViewer, rbacv1.Subject{Kind: "ServiceAccount", Namespace: "team", Name: "revoked"})
		next := c.follow(t, tokenCred(tok), nsA())
		_, err := next() // info
		require.NoError(t, err)
		_, err = next() // history
		require.NoError(t, err)
		require.NoError(t, c.cp.Admin.RbacV1().RoleBindings("ns-a").Delete(context.Background(), binding, metav1.DeleteOptions{}))
		start := time.Now()
		ended := make(chan error, 1)
		go func() {
			for {
				if _, err := next(); err != nil {
					ended <- err
					return
				}
			}
		}()
		select {
		case err := <-ended:
			requireCode(t, err, codes.PermissionDenied, "may not watch")
			// decision TTL (1 s) + re-check interval (0.3 s), with slack for RBAC's own cache
			require.Less(t, time.Since(start), 5*time.Second)
		case <-time.After(15 * time.Second):
			t.Fatal("the stream outlived its revoked binding")
		}
	})

	t.Run("stream limits", func(t *testing.T) {
		a := tokenCred(c.serviceAccount(t, "team", "busy", map[string][]string{flowViewer: {"ns-a"}}))
		b := tokenCred(c.serviceAccount(t, "team", "other", map[string][]string{flowViewer: {"ns-a"}}))
		for range 2 {
			_, err := c.follow(t, a, nsA())()
			require.NoError(t, err)
		}
		_, err := c.follow(t, a, nsA())()
		requireCode(t, err, codes.ResourceExhausted, "limits.max_streams_per_client 2")
		_, err = c.follow(t, b, nsA())()
		require.NoError(t, err)
		_, err = c.follow(t, b, nsA())()
		requireCode(t, err, codes.ResourceExhausted, "limits.max_streams 3")
	})
}

// While the API server is unreachable an established stream goes on: a
// peer's disclosure resting on a cluster-wide grant is kept, one resting on
// a grant in the peer's Namespace falls back to the Flow tier; new streams
// fail closed. Afterwards everything is as before.
func TestAPIBlip(t *testing.T) {
	cp := controlplane.Start(t)
	cp.ApplyClusterRoles(t, clusterRoles)
	c := &cluster{cp: cp, proxy: newTCPProxy(t, cp.URL)}
	c.startExporter(t, true, func(cfg *Config) {
		cfg.Kubernetes.DecisionTTL = 500 * time.Millisecond
		cfg.Kubernetes.RecheckInterval = 200 * time.Millisecond
	})
	recs := testRecords()
	wide := tokenCred(c.serviceAccount(t, "team", "wide", map[string][]string{flowViewer: {"ns-a"}, identityViewer: {""}}))
	local := tokenCred(c.serviceAccount(t, "team", "local", map[string][]string{flowViewer: {"ns-a"}, identityViewer: {"ns-b"}}))
	nextWide := c.follow(t, wide, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}})
	nextLocal := c.follow(t, local, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}})
	for _, next := range []func() (*pb.GetFlowsResponse, error){nextWide, nextLocal} {
		_, err := next() // info
		require.NoError(t, err)
	}
	tierOfNext := func(next func() (*pb.GetFlowsResponse, error)) pb.EndpointDisclosure {
		resp, err := next()
		require.NoError(t, err)
		require.Len(t, resp.Flows, 1)
		return resp.Flows[0].K8S.DestinationDisclosure
	}
	c.push(t, recs["ab"])
	require.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY, tierOfNext(nextWide))
	require.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY, tierOfNext(nextLocal))

	c.proxy.cut()
	time.Sleep(time.Second) // every decision has expired; re-checks fail
	c.push(t, recs["ab"])
	require.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY, tierOfNext(nextWide), "a cluster-wide grant is kept")
	require.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, tierOfNext(nextLocal), "a grant in the peer's Namespace falls back to cluster-wide: none")
	_, err := c.open(t, wide, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}})
	requireCode(t, err, codes.Unavailable, "Kubernetes API unreachable")

	c.proxy.restore(t)
	time.Sleep(6 * time.Second) // failed reviews are retried after 5 s
	c.push(t, recs["ab"])
	require.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY, tierOfNext(nextLocal), "back after the blip")
	_, err = c.open(t, wide, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}})
	require.NoError(t, err)
}
