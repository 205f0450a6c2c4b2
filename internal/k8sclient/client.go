// Package k8sclient builds the Kubernetes clientset of a flowtel component from
// its auth_type and kubeconfig settings, apart from the flow index
// (internal/k8sindex) so that a component that only needs a client does not
// link the index.
package k8sclient

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Authentication types, as the collector-contrib Kubernetes components name them.
const (
	AuthServiceAccount = "serviceAccount"
	AuthKubeConfig     = "kubeConfig"
)

// Auth is how a component reaches the API server. A component's
// configuration squashes it in (mapstructure:",squash"), so auth_type and
// kubeconfig stand beside the component's own keys, as in the
// collector-contrib Kubernetes components.
type Auth struct {
	// AuthType is serviceAccount (in cluster, default) or kubeConfig.
	AuthType string `mapstructure:"auth_type"`
	// KubeConfig is the kubeconfig path for auth_type kubeConfig (empty:
	// $KUBECONFIG, then ~/.kube/config).
	KubeConfig string `mapstructure:"kubeconfig"`
}

// Check validates the settings as CheckAuth does, the keys named after
// prefix. (It is not a Validate method: the collector would call that on the
// squashed settings as well as on the configuration that holds them.)
func (a *Auth) Check(prefix string) error { return CheckAuth(prefix, a.AuthType, a.KubeConfig) }

// Client builds the clientset as New does, naming userAgent to the API server.
func (a *Auth) Client(userAgent string) (kubernetes.Interface, error) {
	return New(a.AuthType, a.KubeConfig, userAgent)
}

// New builds a clientset: in-cluster service account credentials, or a
// kubeconfig file (empty path: $KUBECONFIG, then ~/.kube/config).
func New(authType, kubeconfig, userAgent string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	switch authType {
	case AuthServiceAccount:
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("auth_type: %s found no in-cluster credentials (got %w); run the collector in a Pod with a ServiceAccount token mounted, or set auth_type: %s", authType, err, AuthKubeConfig)
		}
	case AuthKubeConfig:
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if kubeconfig != "" {
			rules.ExplicitPath = kubeconfig
		}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: cannot load %q (got %w); point kubeconfig (or $KUBECONFIG) at a readable kubeconfig file", kubeconfig, err)
		}
	default:
		return nil, fmt.Errorf("auth_type: unknown (got %q); set %s or %s", authType, AuthServiceAccount, AuthKubeConfig)
	}
	cfg.UserAgent = userAgent
	// Protobuf halves the list/watch cost of Pods and EndpointSlices.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(cfg)
}

// CheckAuth validates a component's auth_type and kubeconfig settings, the
// keys named after prefix (such as "kubernetes."), with the same words in
// every component.
func CheckAuth(prefix, authType, kubeconfig string) error {
	switch authType {
	case AuthServiceAccount:
		if kubeconfig != "" {
			return fmt.Errorf("%skubeconfig: only used with auth_type: %s (got auth_type: %s); set %sauth_type: %s, or remove kubeconfig",
				prefix, AuthKubeConfig, authType, prefix, AuthKubeConfig)
		}
	case AuthKubeConfig:
	default:
		return fmt.Errorf("%sauth_type: unknown (got %q); set %s (in a Pod) or %s", prefix, authType, AuthServiceAccount, AuthKubeConfig)
	}
	return nil
}
