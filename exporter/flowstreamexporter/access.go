package flowstreamexporter

import (
	"context"
	"crypto/x509"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/flowtel/flowtel/exporter/flowstreamexporter/internal/metadata"
)

// Where kube-apiserver publishes its client CA bundle.
const (
	clientCANamespace = "kube-system"
	clientCAConfigMap = "extension-apiserver-authentication"
	clientCAKey       = "client-ca-file"
)

// The virtual resource and the verbs checked on it.
const (
	resourceFlows       = "flows"
	subresourceIdentity = "identity"
	verbList            = "list"
	verbWatch           = "watch"
	verbGet             = "get"
)

// errorTTL is how long a failed review is remembered, so that an unreachable
// API server costs one attempt per decision and interval, not one per record.
const errorTTL = 5 * time.Second

// user is an authenticated subject, as a SubjectAccessReview names it.
type user struct {
	name   string
	uid    string
	groups []string
	extra  map[string]authzv1.ExtraValue
	// key identifies the subject in the decision cache.
	key string
}

func newUser(name, uid string, groups []string, extra map[string]authzv1.ExtraValue) *user {
	u := &user{name: name, uid: uid, groups: slices.Clone(groups), extra: extra}
	g := slices.Clone(groups)
	slices.Sort(g)
	var b strings.Builder
	b.WriteString(name + "\x00" + uid + "\x00" + strings.Join(g, "\x01"))
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString("\x00" + k + "=" + strings.Join(extra[k], "\x01"))
	}
	u.key = b.String()
	return u
}

// decisionKey is one cached authorization decision.
type decisionKey struct {
	user, namespace, subresource, verb string
}

type decision struct {
	allowed bool
	err     error
}

// access authenticates clients and authorizes what they see, against the
// Kubernetes API.
type access struct {
	client kubernetes.Interface
	group  string
	ttl    time.Duration
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder

	decisions *cache.LRUExpireCache
	// clusterWide holds the last cluster-wide decision reached for each
	// subject and verb, kept beyond the TTL: what a peer's disclosure falls
	// back to while the API server cannot answer.
	clusterWide sync.Map // decisionKey → bool

	tokenReviews chan struct{} // semaphore
	clientCA     atomic.Pointer[x509.CertPool]
	// reviews counts reviews sent (benchmarks read it).
	reviews atomic.Int64

	stopCA context.CancelFunc
}

func newAccess(client kubernetes.Interface, c *AuthConfig, logger *zap.Logger, tel *metadata.TelemetryBuilder) *access {
	return &access{
		client:       client,
		group:        c.APIGroup,
		ttl:          c.DecisionTTL,
		logger:       logger,
		tel:          tel,
		decisions:    cache.NewLRUExpireCache(65536),
		tokenReviews: make(chan struct{}, c.MaxConcurrentTokenReviews),
	}
}

// startClientCA watches the client CA bundle ConfigMap and loads every
// version of it; until the first load, certificate clients get UNAVAILABLE.
func (a *access) startClientCA() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopCA = cancel
	f := informers.NewSharedInformerFactoryWithOptions(a.client, 0,
		informers.WithNamespace(clientCANamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", clientCAConfigMap).String()
		}))
	inf := f.Core().V1().ConfigMaps().Informer()
	load := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(cm.Data[clientCAKey])) {
			a.logger.Warn("client CA bundle holds no certificate; certificate clients are refused until it does",
				zap.String("configmap", clientCANamespace+"/"+clientCAConfigMap), zap.String("key", clientCAKey))
			a.clientCA.Store(nil)
			return
		}
		a.clientCA.Store(pool)
		a.logger.Info("client CA bundle loaded", zap.String("configmap", clientCANamespace+"/"+clientCAConfigMap))
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj any) { load(obj) },
	})
	f.Start(ctx.Done())
}

func (a *access) shutdown() {
	if a.stopCA != nil {
		a.stopCA()
	}
}

func (a *access) count(ctx context.Context, review string) {
	a.reviews.Add(1)
	a.tel.ExporterFlowStreamAccessReviews.Add(ctx, 1, metric.WithAttributes(attribute.String("review", review)))
}

// authenticate identifies the caller: its TLS client certificate first,
// then its bearer token. Errors are gRPC statuses.
func (a *access) authenticate(ctx context.Context) (*user, error) {
	token := bearerToken(ctx)
	if certs := peerCertificates(ctx); len(certs) > 0 {
		u, err := a.verifyCertificate(certs)
		if err == nil {
			return u, nil
		}
		if token == "" {
			return nil, err
		}
	}
	if token == "" {
		return nil, status.Error(codes.Unauthenticated, "no credential: send a bearer token (authorization: Bearer <token>) or a client certificate signed by the cluster's client CA")
	}
	return a.reviewToken(ctx, token)
}

func peerCertificates(ctx context.Context) []*x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	return ti.State.PeerCertificates
}

func bearerToken(ctx context.Context) string {
	md, _ := grpcmd.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}

// verifyCertificate checks a client certificate chain against the cluster's
// client CA bundle; the user is the Common Name, the groups the
// Organizations, as kube-apiserver maps them.
func (a *access) verifyCertificate(certs []*x509.Certificate) (*user, error) {
	pool := a.clientCA.Load()
	if pool == nil {
		return nil, status.Error(codes.Unavailable, "client CA bundle not loaded yet: retry shortly, or authenticate with a bearer token")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, status.Errorf(codes.Unauthenticated, "client certificate: %v", err)
	}
	if certs[0].Subject.CommonName == "" {
		return nil, status.Error(codes.Unauthenticated, "client certificate: no Common Name (the user name)")
	}
	return newUser(certs[0].Subject.CommonName, "", certs[0].Subject.Organization, nil), nil
}

func (a *access) reviewToken(ctx context.Context, token string) (*user, error) {
	select {
	case a.tokenReviews <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	defer func() { <-a.tokenReviews }()
	a.count(ctx, "token_review")
	tr, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		a.logger.Warn("TokenReview failed", zap.Error(err))
		return nil, status.Error(codes.Unavailable, "cannot verify the token now (Kubernetes API unreachable): retry")
	}
	if !tr.Status.Authenticated {
		msg := "token rejected by the Kubernetes API"
		if tr.Status.Error != "" {
			msg += ": " + tr.Status.Error
		}
		return nil, status.Error(codes.Unauthenticated, msg)
	}
	u := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	return newUser(u.Username, u.UID, u.Groups, extra), nil
}

// allowed asks whether u may verb the flows resource (or subresource) in
// namespace ("" = cluster-wide), from the cache when it can.
func (a *access) allowed(ctx context.Context, u *user, namespace, subresource, verb string) (bool, error) {
	k := decisionKey{user: u.key, namespace: namespace, subresource: subresource, verb: verb}
	if v, ok := a.decisions.Get(k); ok {
		d := v.(decision)
		return d.allowed, d.err
	}
	a.count(ctx, "subject_access_review")
	sar, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.name, UID: u.uid, Groups: u.groups, Extra: u.extra,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: a.group, Resource: resourceFlows, Subresource: subresource,
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		if ctx.Err() == nil {
			a.logger.Warn("SubjectAccessReview failed", zap.Error(err))
			a.decisions.Add(k, decision{err: err}, errorTTL)
		}
		return false, err
	}
	ok := sar.Status.Allowed && !sar.Status.Denied
	a.decisions.Add(k, decision{allowed: ok}, a.ttl)
	if namespace == "" {
		a.clusterWide.Store(k, ok)
	}
	return ok, nil
}

// holds reports whether u holds verb on the flows resource (or
// subresource) in namespace: through a cluster-wide grant, whose last known
// decision is kept while the API server cannot answer, or through a grant in
// the Namespace itself, which counts as absent while it cannot.
func (a *access) holds(ctx context.Context, u *user, namespace, subresource, verb string) bool {
	ok, err := a.allowed(ctx, u, "", subresource, verb)
	if err != nil {
		v, known := a.clusterWide.Load(decisionKey{user: u.key, subresource: subresource, verb: verb})
		ok = known && v.(bool)
	}
	if ok {
		return true
	}
	ok, err = a.allowed(ctx, u, namespace, subresource, verb)
	return err == nil && ok
}

// errNoDecision marks an authorization that could not be reached.
var errNoDecision = errors.New("no decision")

// authorizeScope decides whether a stream may be opened (or go on) for its
// scope with its verb: nil, PERMISSION_DENIED, or errNoDecision wrapped
// with the API error.
func (a *access) authorizeScope(ctx context.Context, u *user, s scope, verb string) error {
	ok, err := a.allowed(ctx, u, s.namespace, "", verb)
	if err != nil {
		return errors.Join(errNoDecision, err)
	}
	if ok {
		return nil
	}
	what := "in Namespace " + s.namespace
	if s.clusterWide {
		what = "cluster-wide"
	}
	return status.Errorf(codes.PermissionDenied, "user %q may not %s flows.%s %s: bind the flow viewer ClusterRole (a RoleBinding in the Namespace, or a ClusterRoleBinding for cluster_wide)", u.name, verb, a.group, what)
}

// peerTier is the disclosure tier of an endpoint in namespace on a stream
// opened for another Namespace with verb.
func (a *access) peerTier(ctx context.Context, u *user, namespace, verb string) tier {
	if namespace == "" {
		return tierFlow
	}
	if a.holds(ctx, u, namespace, "", verb) {
		return tierFull
	}
	if a.holds(ctx, u, namespace, subresourceIdentity, verbGet) {
		return tierIdentity
	}
	return tierFlow
}
