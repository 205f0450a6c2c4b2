package nodeidentityprocessor

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowtel/flowtel/internal/configcheck"
	"github.com/flowtel/flowtel/internal/k8sclient"
)

// Config is the node_identity processor's configuration.
type Config struct {
	// Auth is how the processor reaches the Kubernetes API for TokenReviews.
	k8sclient.Auth `mapstructure:",squash"`
	// Audience is the audience the node collectors' projected tokens are
	// issued for (the volume's serviceAccountToken.audience); a token for
	// another audience, such as the API server's, is refused.
	Audience string `mapstructure:"audience"`
	// ServiceAccounts are the ServiceAccounts, as namespace/name, whose tokens
	// may send flow records: the node collectors'. Empty: any ServiceAccount
	// whose token is bound to a Pod.
	ServiceAccounts []string `mapstructure:"service_accounts"`
	// CacheTTL is how long a reviewed token's answer is kept (tokens are
	// looked up by their SHA-256).
	CacheTTL time.Duration `mapstructure:"cache_ttl"`
	// MaxCachedTokens bounds the cache; when full it is emptied.
	MaxCachedTokens int `mapstructure:"max_cached_tokens"`

	_ struct{}
}

const (
	defaultAudience        = "flowtel-gateway"
	defaultCacheTTL        = time.Minute
	defaultMaxCachedTokens = 10_000
)

func createDefaultConfig() *Config {
	return &Config{
		Auth:            k8sclient.Auth{AuthType: k8sclient.AuthServiceAccount},
		Audience:        defaultAudience,
		CacheTTL:        defaultCacheTTL,
		MaxCachedTokens: defaultMaxCachedTokens,
	}
}

// Validate checks the configuration; each error names the key, what is
// wrong and how to fix it.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Auth.Check(""); err != nil {
		errs = append(errs, err)
	}
	if c.Audience == "" {
		errs = append(errs, fmt.Errorf("audience: must not be empty; set the audience of the node collectors' projected token, such as %s", defaultAudience))
	}
	for _, sa := range c.ServiceAccounts {
		if ns, name, ok := strings.Cut(sa, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("service_accounts: %q is not namespace/name; list the node collectors' ServiceAccount, such as flowtel/flowtel-node", sa))
		}
	}
	errs = configcheck.Positive(errs, "cache_ttl", c.CacheTTL, fmt.Sprintf("set a duration such as %v", defaultCacheTTL))
	errs = configcheck.Positive(errs, "max_cached_tokens", c.MaxCachedTokens, fmt.Sprintf("set a bound such as %d", defaultMaxCachedTokens))
	return errors.Join(errs...)
}

// usernames are the TokenReview usernames of the allowed ServiceAccounts.
func (c *Config) usernames() map[string]bool {
	if len(c.ServiceAccounts) == 0 {
		return nil
	}
	out := make(map[string]bool, len(c.ServiceAccounts))
	for _, sa := range c.ServiceAccounts {
		ns, name, _ := strings.Cut(sa, "/")
		out["system:serviceaccount:"+ns+":"+name] = true
	}
	return out
}
