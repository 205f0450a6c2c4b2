package nodeidentityprocessor

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flowtel/flowtel/processor/nodeidentityprocessor/internal/metadata"
)

// nodeNameExtra is the TokenReview user extra in which the API server names
// the Node of the Pod a token is bound to.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// verdict is what a TokenReview said of a token: its sender's Node, or why
// it has none.
type verdict struct {
	node    string
	reason  string
	err     error
	expires time.Time
}

// reviewer asks the API server who sent a token (TokenReview) and caches the
// answer for cache_ttl, by the token's SHA-256. A review that failed (the API
// server unreachable, timing out, overloaded or refusing the call) is no
// answer about the token: it is not cached, and its reason is
// review_unavailable, never invalid_token.
type reviewer struct {
	client    kubernetes.Interface
	audience  string
	allowed   map[string]bool
	ttl       time.Duration
	maxTokens int
	tel       *metadata.TelemetryBuilder

	mu    sync.Mutex
	cache map[[sha256.Size]byte]verdict
}

func newReviewer(c kubernetes.Interface, cfg *Config, tel *metadata.TelemetryBuilder) *reviewer {
	return &reviewer{client: c, audience: cfg.Audience, allowed: cfg.usernames(), ttl: cfg.CacheTTL,
		maxTokens: cfg.MaxCachedTokens, tel: tel, cache: map[[sha256.Size]byte]verdict{}}
}

// node returns the Node of the token's sender, or the refusal reason and
// an error saying why: review_unavailable when the API server gave no answer
// (the request may be sent again), another reason when it refused the token.
func (r *reviewer) node(ctx context.Context, token string) (string, string, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	r.mu.Lock()
	v, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Before(v.expires) {
		return v.node, v.reason, v.err
	}
	v, err := r.review(ctx, token)
	if err != nil {
		return "", refusedUnavailable, err
	}
	v.expires = now.Add(r.ttl)
	r.mu.Lock()
	if len(r.cache) >= r.maxTokens {
		clear(r.cache)
	}
	r.cache[key] = v
	r.mu.Unlock()
	return v.node, v.reason, v.err
}

// review sends one TokenReview; its error is the API call's, the verdict's
// is the refusal.
func (r *reviewer) review(ctx context.Context, token string) (verdict, error) {
	r.tel.ProcessorNodeIdentityTokenReviews.Add(ctx, 1)
	tr, err := r.client.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{
		Spec: authv1.TokenReviewSpec{Token: token, Audiences: []string{r.audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return verdict{}, fmt.Errorf("TokenReview failed, the sender's token is not judged (send again later): %w; the gateway needs the API server and create on tokenreviews (ClusterRole system:auth-delegator)", err)
	}
	st := tr.Status
	switch {
	case !st.Authenticated:
		return verdict{reason: refusedInvalidToken, err: fmt.Errorf("the API server did not authenticate the token for audience %s: %s", r.audience, st.Error)}, nil
	case r.allowed != nil && !r.allowed[st.User.Username]:
		return verdict{reason: refusedNotAllowed, err: fmt.Errorf("%s may not send flow records; only the node collectors' ServiceAccounts (service_accounts) may", st.User.Username)}, nil
	}
	nodes := st.User.Extra[nodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return verdict{reason: refusedUnbound, err: errors.New(st.User.Username + "'s token is not bound to a Pod on a Node; mount a projected serviceAccountToken volume in the node collector")}, nil
	}
	return verdict{node: nodes[0]}, nil
}
