package k8scertificatesextension

import (
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/configtest"
	"github.com/flowtel/flowtel/internal/k8sclient"
)

// TestLoadConfig: every instance of testdata/config.yaml, loaded over the
// defaults as the collector loads it, is the whole struct expected, or fails
// validation with the errors expected.
func TestLoadConfig(t *testing.T) {
	f := NewFactory()
	configtest.LoadConfig(t, f, []configtest.Case{
		{Name: "", Want: configtest.Defaults(f, func(*Config) {})},
		{Name: "helm", Want: configtest.Defaults(f, func(c *Config) {
			c.Namespace = "netflows"
			c.GatewayName, c.NodeName, c.FlowStreamName = "lab-flowtel-gateway", "lab-flowtel-node", "lab-flowtel-flowstream"
			c.OwnerServiceAccount = "lab-flowtel-gateway"
			c.Validity, c.RenewBefore, c.CheckInterval = 720*time.Hour, 240*time.Hour, 10*time.Minute
		})},
		{Name: "kubeconfig", Want: configtest.Defaults(f, func(c *Config) {
			c.AuthType, c.KubeConfig = k8sclient.AuthKubeConfig, "/etc/kube/config"
			c.WaitForFiles, c.WaitTimeout = []string{"/etc/flowtel/tls/tls.crt", "/etc/flowtel/tls/tls.key"}, 2*time.Minute
		})},
		{Name: "negative_wait", Err: "wait_timeout: must not be negative (got -1s)"},
		{Name: "bad_auth", Err: `auth_type: unknown (got "token"); set serviceAccount (in a Pod) or kubeConfig`},
		{Name: "no_names", WantErr: []string{
			`gateway_name: required (got ""); set the name the Pods' Secrets start with`,
			`node_name: required (got ""); set the name the Pods' Secrets start with`,
			`flowstream_name: required (got ""); set the name the Pods' Secrets start with`,
		}},
		{Name: "bad_owner", Err: `owner_service_account: not a ServiceAccount name (got "flowtel_gateway"); lower case letters, digits, '-' and '.', at most 253, starting and ending with a letter or digit`},
		{Name: "renew_after_expiry", Err: "renew_before: must be shorter than validity (got 48h0m0s, validity 24h0m0s); every check would reissue"},
		{Name: "slow_checks", Err: "check_interval: must be shorter than renew_before (got 800h0m0s, renew_before 720h0m0s); a certificate could expire between checks"},
		{Name: "zero_validity", WantErr: []string{
			"ca_validity: must be positive (got 0s)",
			"validity: must not exceed ca_validity (got 2160h0m0s, ca_validity 0s)",
			"ca_renew_before: must be shorter than ca_validity (got 4320h0m0s, ca_validity 0s); every check would make a new CA",
		}},
		{Name: "ca_renewed_late", Err: "ca_renew_before: must be at least validity (got 720h0m0s, validity 2160h0m0s); a certificate issued before the new CA is made would outlive its CA"},
		{Name: "ca_short", Want: configtest.Defaults(f, func(c *Config) {
			c.CAValidity, c.CARenewBefore, c.Validity, c.RenewBefore, c.CheckInterval = 48*time.Hour, 12*time.Hour, 6*time.Hour, 2*time.Hour, 10*time.Minute
		})},
	})
}
