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
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

//go:embed ui
var uiFiles embed.FS

// uiCommand serves the web view: a page on this machine that follows the
// flow stream as the kubeconfig's user (the stream's RBAC applies as to
// observe) and draws who talks to whom and the flows table, live.
func uiCommand(kube *genericclioptions.ConfigFlags) *cobra.Command {
	cmd, conn, sc := streamCommand(kube, "ui", "serve a live web view (map and flows table) of the flow stream on this machine")
	fs := cmd.Flags()
	listen := fs.String("listen", "127.0.0.1:8080", "address the page is served on: a loopback address (the page streams as you), unless --"+remotePlainHTTPFlag)
	remote := fs.Bool(remotePlainHTTPFlag, false, "allow a non-loopback --listen: the page, its key and your flows then travel over plain HTTP, and whoever reads the key on the way streams as you")
	group := fs.String("group", "workload", "what a node of the map is: workload (a Pod's owner, else the Pod) or pod")
	since := fs.String("since", "", "the page starts with the flows that ended after this (a duration, 1h or 7d, or an RFC 3339 time; older than the gateway holds in memory is read from its flow history), then live ones; with -n or --cluster-wide it opens on that scope")
	return runs(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
		start, err := uiStart(*sc, *since)
		if err != nil {
			return err
		}
		if *group != "workload" && *group != "pod" {
			return fmt.Errorf("--group: %q is not workload or pod", *group)
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
		defer ln.Close()
		addr := ln.Addr().(*net.TCPAddr)
		// The bound address decides (a name may resolve anywhere; ":8080" is every interface).
		if !addr.IP.IsLoopback() && !*remote {
			return fmt.Errorf("--listen %s: not a loopback address: the page, its key and your flows would travel over plain HTTP to anyone who can reach %s. Keep it on 127.0.0.1 or [::1] (from another machine: ssh -L 8080:127.0.0.1:8080), or add --%s to accept that",
				*listen, addr, remotePlainHTTPFlag)
		}
		sess, err := conn.dial(ctx)
		if err != nil {
			return err
		}
		defer sess.conn.Close()
		secret := make([]byte, 16)
		_, _ = rand.Read(secret)
		host, _, _ := net.SplitHostPort(*listen)
		u := &uiServer{sess: sess, secret: hex.EncodeToString(secret), byWorkload: *group == "workload",
			hosts: allowedHosts(host, addr), port: strconv.Itoa(addr.Port), anyAddress: addr.IP.IsUnspecified()}
		srv := &http.Server{Handler: u.routes(), ReadHeaderTimeout: 10 * time.Second,
			// Interrupting flowctl ends the pages' streams too.
			BaseContext: func(net.Listener) context.Context { return ctx }}
		shown := addr.String()
		if addr.IP.IsUnspecified() {
			shown = net.JoinHostPort("127.0.0.1", u.port)
		}
		if !addr.IP.IsLoopback() {
			fmt.Fprintf(stderr, "flowctl: WARNING: serving on %s over plain HTTP (--%s): the key below and your flows travel unencrypted; whoever reads the key streams as you\n", addr, remotePlainHTTPFlag)
		}
		fmt.Fprintf(stderr, "flowctl: the flow view is at http://%s/?%s (streaming as the kubeconfig's user; Ctrl-C ends it)\n", shown, startQuery(u.secret, start))
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
	})
}

// uiStart is the page's query for the scope and history flowctl ui was
// started with (-n or --cluster-wide, --since): the printed address carries
// it, so the page opens on it. The since is kept as given (a duration is
// then from each time the page asks): it is checked here.
func uiStart(sc scopeFlags, since string) (url.Values, error) {
	q := url.Values{}
	switch {
	case sc.clusterWide && sc.given() != "":
		return nil, errors.New("-n and --cluster-wide exclude each other")
	case sc.clusterWide:
		q.Set("clusterWide", "true")
	case sc.given() != "":
		q.Set("namespace", sc.given())
	}
	if since != "" {
		if _, err := parseSince(since, time.Now()); err != nil {
			return nil, err
		}
		q.Set("since", since)
	}
	return q, nil
}

// startQuery is the printed address's query: the key first, then the start.
func startQuery(key string, start url.Values) string {
	s := "key=" + url.QueryEscape(key)
	if len(start) > 0 {
		s += "&" + start.Encode()
	}
	return s
}

// remotePlainHTTPFlag allows `flowctl ui --listen` on a non-loopback address.
const remotePlainHTTPFlag = "allow-remote-plain-http"

// uiServer serves the page and, per page, a following stream as
// server-sent events.
type uiServer struct {
	sess *session
	// secret is in the URL flowctl prints; the first page load trades it
	// for a cookie: only who has it streams as the user.
	secret     string
	byWorkload bool
	// hosts (lower case) and port are what the Host header may name;
	// anyAddress (listening on every interface) also admits any IP address.
	hosts      []string
	port       string
	anyAddress bool
}

// allowedHosts are the names a request's Host header may give for a
// listener on addr, asked for as listenHost: loopback's, and the listen
// address's own.
func allowedHosts(listenHost string, addr *net.TCPAddr) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	for _, h := range []string{strings.ToLower(listenHost), addr.IP.String()} {
		if h != "" && !addr.IP.IsUnspecified() && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// cookieName is per port: a browser sends a host's cookies to all its ports.
func (u *uiServer) cookieName() string { return "flowctl-ui-" + u.port }

func (u *uiServer) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(uiFiles, "ui")
	mux.Handle("GET /", u.keyToCookie(http.FileServerFS(static)))
	mux.HandleFunc("GET /api/flows", u.flows)
	return u.checkHost(mux)
}

// checkHost answers only requests for the address flowctl listens on. A
// page of another site whose name the attacker resolves to 127.0.0.1 (DNS
// rebinding) is of its own origin and names its own host: 421.
func (u *uiServer) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		if !u.hostAllowed(r.Host) {
			http.Error(w, fmt.Sprintf("flowctl ui answers only for %s with port %s, not %q", strings.Join(u.hosts, ", "), u.port, r.Host), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (u *uiServer) hostAllowed(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil { // no port: 80
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), "80"
	}
	if port != u.port {
		return false
	}
	host = strings.ToLower(host)
	if slices.Contains(u.hosts, host) {
		return true
	}
	// On every interface, any address of this machine may be asked for; an
	// address (unlike a name) cannot be rebound.
	_, err = netip.ParseAddr(host)
	return u.anyAddress && err == nil
}

// keyToCookie trades the printed address's key for a cookie: HttpOnly (the
// page's script never sees it), SameSite=Strict (no other site's request
// carries it), per port, for this session of the browser; and sends the
// browser on to the same address without the key, so that it stays out of
// the address bar, the history and bookmarks.
func (u *uiServer) keyToCookie(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !q.Has("key") {
			next.ServeHTTP(w, r)
			return
		}
		if subtle.ConstantTimeCompare([]byte(q.Get("key")), []byte(u.secret)) != 1 {
			http.Error(w, "this address's key is wrong: flowctl ui makes a new one each time it starts; open the address it printed", http.StatusForbidden)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: u.cookieName(), Value: u.secret, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q.Del("key")
		to := r.URL.Path
		if len(q) > 0 {
			to += "?" + q.Encode()
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	})
}

// authorized: the request carries the cookie keyToCookie set.
func (u *uiServer) authorized(r *http.Request) bool {
	c, err := r.Cookie(u.cookieName())
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(u.secret)) == 1
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
	if !u.authorized(r) {
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
