package nodeidentityprocessor

import (
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/configtest"
	"github.com/flowtel/flowtel/internal/k8sclient"
)

func TestLoadConfig(t *testing.T) {
	configtest.LoadConfig(t, NewFactory(), []configtest.Case{
		{Name: "", Want: createDefaultConfig()},
		{Name: "set", Want: &Config{Auth: k8sclient.Auth{AuthType: "kubeConfig", KubeConfig: "/etc/flowtel/kubeconfig"}, Audience: "flowtel",
			ServiceAccounts: []string{"flowtel/flowtel-node"}, CacheTTL: 30 * time.Second, MaxCachedTokens: 100}},
		{Name: "bad", Err: `auth_type: unknown (got "token"); set serviceAccount (in a Pod) or kubeConfig` + "\n" +
			"audience: must not be empty; set the audience of the node collectors' projected token, such as flowtel-gateway\n" +
			`service_accounts: "flowtel-node" is not namespace/name; list the node collectors' ServiceAccount, such as flowtel/flowtel-node` + "\n" +
			`service_accounts: "flowtel/" is not namespace/name; list the node collectors' ServiceAccount, such as flowtel/flowtel-node` + "\n" +
			"cache_ttl: must be positive (got 0s); set a duration such as 1m0s\n" +
			"max_cached_tokens: must be positive (got -1); set a bound such as 10000"},
	})
}
