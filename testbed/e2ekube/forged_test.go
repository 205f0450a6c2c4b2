//go:build integration

package e2ekube

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/testbed/kube"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// requireForgedTokenRefused: a sender on node-2 that presents node-1's
// collector token (with the client certificate every node collector has)
// gets none of node-2's records past the gateway: they are refused and
// counted (other_node), and never reach ClickHouse. The same record sent
// with node-2's own token is taken and stored, so the refusal is the
// token's doing, not the connection's. (The gateway's accepted counter is
// no measure: the Nodes' own collectors keep sending to it meanwhile.)
func (b *bed) requireForgedTokenRefused(t *testing.T, w *world, release, namespace string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gw := b.pod(t, ctx, namespace, "app.kubernetes.io/name=flowtel-gateway,app.kubernetes.io/instance="+release, "")
	from := b.Nodes[1]
	dial := kube.Dialer(netlab.NetNSPath(from.NS))
	send := func(token string, sport uint16) {
		t.Helper()
		conn := b.gatewayConn(t, ctx, gw.Status.PodIP, release, namespace, dial)
		defer conn.Close()
		ld := plog.NewLogs()
		attrcodec.Encode(b.halfOf(w, from.Name, sport), ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
		md := metadata.Pairs("authorization", "Bearer "+token)
		if _, err := plogotlp.NewGRPCClient(conn).Export(metadata.NewOutgoingContext(ctx, md), plogotlp.NewExportRequestFromLogs(ld)); err != nil {
			t.Fatalf("export to %s from %s: %v", gw.Name, from.Name, err)
		}
	}
	refused := func() float64 {
		return b.gatewayCounter(t, ctx, dial, gw.Status.PodIP, "otelcol_processor_node_identity_records_refused", `reason="other_node"`)
	}

	const forged, own = 23001, 23002
	refusedBefore := refused()
	send(b.collectorToken(t, ctx, release, namespace, b.Nodes[0].Name), forged)
	if got := refused() - refusedBefore; got != 1 {
		t.Fatalf("node-2's record with node-1's token: %v records refused as other_node, want 1", got)
	}
	send(b.collectorToken(t, ctx, release, namespace, from.Name), own)
	// The own record is a half that waits for its pair, then goes out
	// unpaired: its row says the pipeline behind the refusal ran, and the
	// forged one, sent before it, would be there by then.
	conn := b.clickhouse(t)
	for {
		r, err := readRow(ctx, conn, 6, own)
		if err != nil {
			t.Fatalf("reading the row of port %d: %v", own, err)
		}
		if r.rows > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("node-2's record with its own token: no row in ClickHouse")
		}
		time.Sleep(time.Second)
	}
	if r, err := readRow(ctx, conn, 6, forged); err != nil || r.rows != 0 {
		t.Fatalf("node-2's record with node-1's token: %d rows in ClickHouse, want 0 (%v)", r.rows, err)
	}
}

// pod is the first Pod matching selector (on node, unless "").
func (b *bed) pod(t *testing.T, ctx context.Context, namespace, selector, node string) corev1.Pod {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: selector}
	if node != "" {
		opts.FieldSelector = "spec.nodeName=" + node
	}
	pods, err := b.Admin.CoreV1().Pods(namespace).List(ctx, opts)
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no Pod %s on %q in %s: %v", selector, node, namespace, err)
	}
	return pods.Items[0]
}

// collectorToken is a token of the node collector's ServiceAccount bound to
// its Pod on node, with the audience the DaemonSet projects.
func (b *bed) collectorToken(t *testing.T, ctx context.Context, release, namespace, node string) string {
	t.Helper()
	p := b.pod(t, ctx, namespace, "app.kubernetes.io/name=flowtel-node,app.kubernetes.io/instance="+release, node)
	tr, err := b.Admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, p.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"flowtel-gateway"},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s: %v", p.Name, err)
	}
	return tr.Status.Token
}

// gatewayConn is an OTLP connection to a gateway Pod as a node collector
// makes it: the gateway's certificate checked against the install's CA, the
// node client certificate presented.
func (b *bed) gatewayConn(t *testing.T, ctx context.Context, ip, release, namespace string, dial func(context.Context, string, string) (net.Conn, error)) *grpc.ClientConn {
	t.Helper()
	secret := func(name string) *corev1.Secret {
		s, err := b.Admin.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Secret %s: %v", name, err)
		}
		return s
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(secret(release + "-gateway-ca").Data["ca.crt"]) {
		t.Fatalf("Secret %s-gateway-ca: no CA certificate", release)
	}
	nodeTLS := secret(release + "-node-tls")
	cert, err := tls.X509KeyPair(nodeTLS.Data["tls.crt"], nodeTLS.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	creds := credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert},
		ServerName: fmt.Sprintf("%s-gateway.%s.svc", release, namespace), MinVersion: tls.VersionTLS12})
	conn, err := grpc.NewClient("passthrough:///"+net.JoinHostPort(ip, "4317"), grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// halfOf is the source half node reports of a connection from its client
// Pod to the web Pod of the other Node.
func (b *bed) halfOf(w *world, node string, sport uint16) *flowrecord.Record {
	client, server := w.pods["client-2"], w.pods["web-1"]
	now := time.Now()
	r := &flowrecord.Record{Start: now.Add(-2 * time.Second), End: now, Observed: now,
		FlowType: flowrecord.FlowTypeInterNode, EndReason: flowrecord.EndReasonActiveTimeout}
	r.Reporter.NodeName, r.Reporter.Side = node, flowrecord.SideSource
	r.Source.Address, r.Source.Port = netip.MustParseAddr(client.ip), sport
	r.Source.PodName, r.Source.Namespace, r.Source.NodeName, r.Source.Kind = client.name, "shop", client.node, flowrecord.EndpointPod
	r.Destination.Address, r.Destination.Port = netip.MustParseAddr(server.ip), 8080
	r.Destination.PodName, r.Destination.Namespace, r.Destination.NodeName, r.Destination.Kind = server.name, "shop", server.node, flowrecord.EndpointPod
	r.Protocol = 6
	r.Stats.PacketTotal, r.Stats.PacketDelta, r.Stats.OctetTotal, r.Stats.OctetDelta = 3, 3, 180, 180
	return r
}

// gatewayCounter sums a counter of the gateway Pod's metrics over the
// samples whose labels contain match.
func (b *bed) gatewayCounter(t *testing.T, ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), ip, name, match string) float64 {
	t.Helper()
	c := http.Client{Transport: &http.Transport{DialContext: dial}, Timeout: 10 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, "8888")+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("gateway metrics: %v", err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || !strings.Contains(line, match) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}
