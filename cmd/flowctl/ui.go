package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

//go:embed ui
var uiFiles embed.FS

// uiCommand serves the web view: a page on this machine that follows the
// flow stream as the kubeconfig's user (the stream's RBAC applies as to
// observe) and draws who talks to whom and the flows table, live.
func uiCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ui", stderr)
	var conn connFlags
	conn.register(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "address the page is served on (keep it on loopback: the page streams as you)")
	group := fs.String("group", "workload", "what a node of the map is: workload (a Pod's owner, else the Pod) or pod")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *group != "workload" && *group != "pod" {
		return fmt.Errorf("--group: %q is not workload or pod", *group)
	}
	sess, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer sess.conn.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	u := &uiServer{sess: sess, secret: hex.EncodeToString(secret), byWorkload: *group == "workload"}
	srv := &http.Server{Handler: u.routes(), ReadHeaderTimeout: 10 * time.Second,
		// Interrupting flowctl ends the pages' streams too.
		BaseContext: func(net.Listener) context.Context { return ctx }}
	fmt.Fprintf(stderr, "flowctl: the flow view is at http://%s/?key=%s (streaming as the kubeconfig's user; Ctrl-C ends it)\n", ln.Addr(), u.secret)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// uiServer serves the page and, per page, a following stream as
// server-sent events.
type uiServer struct {
	sess       *session
	secret     string // in the URL flowctl prints: only who has it streams as the user
	byWorkload bool
}

func (u *uiServer) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(uiFiles, "ui")
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /api/flows", u.flows)
	return mux
}

// uiFlow is one flow as the page shows it: a table row, and its edge on the
// map between two map nodes (flowctl map's vertices).
type uiFlow struct {
	ID      string `json:"id"`
	End     string `json:"end"`
	Src     string `json:"src"`
	Dst     string `json:"dst"`
	Proto   string `json:"proto"`
	Type    string `json:"type"`
	Service string `json:"service"`
	Verdict string `json:"verdict"`
	Bytes   uint64 `json:"bytes"`
	Outcome string `json:"outcome"` // "", refused or denied
	From    vertex `json:"from"`
	To      vertex `json:"to"`
}

func (u *uiServer) toUI(f *pb.Flow) uiFlow {
	k := f.GetK8S()
	src, dst := streamEnds(f)
	out := uiFlow{
		ID:      f.GetId(),
		End:     f.GetEndTs().AsTime().UTC().Format(time.RFC3339),
		Src:     endpoint(f.GetIp().GetSource(), f.GetTransport().GetSourcePort(), k.GetSourcePodNamespace(), k.GetSourcePodName(), k.GetSourceDisclosure()),
		Dst:     endpoint(f.GetIp().GetDestination(), f.GetTransport().GetDestinationPort(), k.GetDestinationPodNamespace(), k.GetDestinationPodName(), k.GetDestinationDisclosure()),
		Proto:   protocol(f.GetTransport().GetProtocolNumber()),
		Type:    flowType(k.GetFlowType()),
		Service: dash(k.GetDestinationServicePortName()),
		Verdict: verdict(k),
		Bytes:   f.GetStats().GetOctetTotalCount() + f.GetReverseStats().GetOctetTotalCount(),
		From:    src.vertex(u.byWorkload),
		To:      dst.vertex(u.byWorkload),
	}
	switch {
	case streamDenied(k):
		out.Outcome = outcomeDenied
	case streamRefused(f):
		out.Outcome = outcomeRefused
	}
	return out
}

// uiRequest builds the stream request from the page's query: the scope
// (namespace or clusterWide) and observe's filters.
func uiRequest(q map[string][]string) (*pb.GetFlowsRequest, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	req := &pb.GetFlowsRequest{Follow: true}
	switch ns := get("namespace"); {
	case get("clusterWide") == "true":
		req.ClusterWide = true
	case ns != "":
		req.Namespaces = []string{ns}
	default:
		return nil, errors.New("pick a Namespace, or cluster-wide")
	}
	var pods, services, ips list
	_ = pods.Set(get("pod"))
	_ = services.Set(get("service"))
	_ = ips.Set(get("ip"))
	filter := &pb.FlowFilter{PodNames: pods, PodLabelSelector: get("selector"), ServiceNames: services, Ips: ips}
	if d := get("direction"); d != "" {
		dir, ok := directions[d]
		if !ok {
			return nil, fmt.Errorf("direction: %q is not both, from or to", d)
		}
		filter.Direction = dir
	}
	if t := get("flowType"); t != "" {
		ft, ok := flowTypes[t]
		if !ok {
			return nil, fmt.Errorf("flow type: %q is not intra-node, inter-node, to-external or from-external", t)
		}
		filter.FlowTypes = []pb.FlowType{ft}
	}
	for _, ip := range ips {
		if _, err := netip.ParsePrefix(ip); err != nil {
			if _, err := netip.ParseAddr(ip); err != nil {
				return nil, fmt.Errorf("ip: %q is not an IP address or CIDR", ip)
			}
		}
	}
	req.Filters = []*pb.FlowFilter{filter}
	if s := get("since"); s != "" {
		t, err := parseSince(s, time.Now())
		if err != nil {
			return nil, errors.New(strings.TrimPrefix(err.Error(), "--"))
		}
		req.Since = timestamppb.New(t)
	}
	return req, nil
}

// flows follows the stream for one page and sends it as server-sent events:
// "flows" (a JSON array of uiFlow), "gap", "status" (reconnecting,
// reconnected) and "failed" (why the stream ended: the page shows it).
func (u *uiServer) flows(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.URL.Query().Get("key")), []byte(u.secret)) != 1 {
		http.Error(w, "this page's key is missing or wrong: open the address flowctl ui printed", http.StatusForbidden)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	send := func(event string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return err
		}
		fl.Flush()
		return nil
	}
	req, err := uiRequest(r.URL.Query())
	if err != nil {
		_ = send("failed", err.Error())
		return
	}
	_ = send("status", "connecting")
	rd := &reader{sess: u.sess, req: req, stderr: &sseLines{send: send}, gap: func(g gap) error { return send("gap", g) }}
	err = rd.run(r.Context(), func(flows []*pb.Flow) error {
		out := make([]uiFlow, 0, len(flows))
		for _, f := range flows {
			out = append(out, u.toUI(f))
		}
		return send("flows", out)
	})
	if err != nil && r.Context().Err() == nil {
		_ = send("failed", err.Error())
	}
}

// sseLines turns the reader's stderr lines (stream lost, reconnected) into
// "status" events.
type sseLines struct{ send func(string, any) error }

func (s *sseLines) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		if l = strings.TrimPrefix(l, "flowctl: "); l != "" {
			_ = s.send("status", l)
		}
	}
	return len(p), nil
}
