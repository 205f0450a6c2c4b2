package k8sindex

import (
	"fmt"
	"time"

	"github.com/flowtel/flowtel/internal/configcheck"
	"github.com/flowtel/flowtel/internal/k8sclient"
)

// Settings configures a component's Kubernetes index the same way in
// k8s_flow and in flow_correlation's kubernetes section: how it reaches the
// API server, whether Start waits for its caches, and how long a deleted Pod
// still names connections. A configuration squashes it in, so its keys stand
// beside the component's own.
type Settings struct {
	k8sclient.Auth `mapstructure:",squash"`
	// WaitForSync makes Start wait until every cache is filled (and the
	// cluster UID read), and fail with an error naming the resource and verb
	// when a list fails.
	WaitForSync bool `mapstructure:"wait_for_sync"`
	// WaitForSyncTimeout bounds that wait.
	WaitForSyncTimeout time.Duration `mapstructure:"wait_for_sync_timeout"`
	// DeletedPodRetention is how long a deleted or terminated Pod still names
	// connections that started while it ran (decision D7).
	DeletedPodRetention time.Duration `mapstructure:"deleted_pod_retention"`
}

// DefaultSettings: the in-cluster ServiceAccount, waiting up to a minute for
// the caches, DefaultDeletedPodRetention.
func DefaultSettings() Settings {
	return Settings{
		Auth:                k8sclient.Auth{AuthType: k8sclient.AuthServiceAccount},
		WaitForSync:         true,
		WaitForSyncTimeout:  time.Minute,
		DeletedPodRetention: DefaultDeletedPodRetention,
	}
}

// Check appends to errs an error for each setting that is wrong and returns
// errs. (It is not a Validate method: the collector would call that on the
// squashed settings as well as on the configuration that holds them.)
func (s *Settings) Check(errs []error) []error {
	if err := s.Auth.Check(""); err != nil {
		errs = append(errs, err)
	}
	if s.WaitForSync && s.WaitForSyncTimeout <= 0 {
		errs = append(errs, fmt.Errorf("wait_for_sync_timeout: must be positive when wait_for_sync is true (got %v); set a duration such as 1m, or wait_for_sync: false", s.WaitForSyncTimeout))
	}
	return configcheck.Positive(errs, "deleted_pod_retention", s.DeletedPodRetention, fmt.Sprintf("set a duration such as %v", DefaultDeletedPodRetention))
}
