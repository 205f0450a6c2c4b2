package k8scertificatesextension

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flowtel/flowtel/internal/k8sclient"
)

// Config names the Secrets the extension keeps and how long what is in them lasts.
type Config struct {
	// Auth is how the extension reaches the API server.
	k8sclient.Auth `mapstructure:",squash"`
	// Namespace holds the Secrets (empty: the Pod's own namespace).
	Namespace string `mapstructure:"namespace"`
	// GatewayName is the gateway Service's name: the gateway's certificate is
	// for <gateway_name>.<namespace>.svc; the Secrets are <gateway_name>-tls,
	// <gateway_name>-ca and <gateway_name>-ca-key.
	GatewayName string `mapstructure:"gateway_name"`
	// NodeName prefixes the node collectors' Secrets: <node_name>-tls,
	// <node_name>-ca and <node_name>-ca-key.
	NodeName string `mapstructure:"node_name"`
	// FlowStreamName is the flow stream fan-in Service's name: its
	// certificate is <flowstream_name>-tls, for <flowstream_name>.<namespace>.svc.
	FlowStreamName string `mapstructure:"flowstream_name"`
	// OwnerServiceAccount names a ServiceAccount in the namespace that every
	// Secret the extension manages belongs to (an ownerReference): Kubernetes
	// deletes the Secrets with it. The gateway's own ServiceAccount, which
	// lives as long as the install and survives upgrades. Empty: the Secrets
	// belong to nothing and outlive the install.
	OwnerServiceAccount string `mapstructure:"owner_service_account"`
	// CAValidity is how long a new CA lasts.
	CAValidity time.Duration `mapstructure:"ca_validity"`
	// CARenewBefore: a CA with less validity left gets a successor, published
	// in the trust bundles at once; the successor signs from when the CA has
	// less than validity left. At least validity, less than ca_validity.
	CARenewBefore time.Duration `mapstructure:"ca_renew_before"`
	// Validity is how long a new certificate lasts.
	Validity time.Duration `mapstructure:"validity"`
	// RenewBefore: a certificate with less validity left is reissued.
	RenewBefore time.Duration `mapstructure:"renew_before"`
	// CheckInterval is how often the Secrets are checked (and, at start, how
	// soon a failed check is tried again, at most).
	CheckInterval time.Duration `mapstructure:"check_interval"`
	// WaitForFiles are files Start waits for, after the first check, at most
	// wait_timeout: the gateway's own certificate as its Secret volume holds
	// it. On a first install the kubelet fills the volume some time after the
	// Secret is made, and the receivers, which start after the extensions,
	// read it.
	WaitForFiles []string `mapstructure:"wait_for_files"`
	// WaitTimeout bounds that wait; then Start returns anyway.
	WaitTimeout time.Duration `mapstructure:"wait_timeout"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// serviceAccountNamespace is where a Pod's namespace is mounted.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// namespace returns the configured namespace, else the Pod's.
func (c *Config) namespace() (string, error) {
	if c.Namespace != "" {
		return c.Namespace, nil
	}
	b, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return "", fmt.Errorf("namespace: empty and the Pod's namespace is unreadable (%w); set namespace", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (c *Config) serviceName(service string) string {
	return service + "." + c.Namespace + ".svc"
}

// Validate checks names and durations.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Auth.Check(""); err != nil {
		errs = append(errs, err)
	}
	for _, n := range []struct{ key, value string }{{"gateway_name", c.GatewayName}, {"node_name", c.NodeName}, {"flowstream_name", c.FlowStreamName}} {
		if n.value == "" {
			errs = append(errs, fmt.Errorf("%s: required (got \"\"); set the name the Pods' Secrets start with", n.key))
		}
	}
	if c.OwnerServiceAccount != "" {
		if len(validation.IsDNS1123Subdomain(c.OwnerServiceAccount)) > 0 {
			errs = append(errs, fmt.Errorf("owner_service_account: not a ServiceAccount name (got %q); lower case letters, digits, '-' and '.', at most 253, starting and ending with a letter or digit", c.OwnerServiceAccount))
		}
	}
	for _, d := range []struct {
		key   string
		value time.Duration
	}{{"ca_validity", c.CAValidity}, {"ca_renew_before", c.CARenewBefore}, {"validity", c.Validity}, {"renew_before", c.RenewBefore}, {"check_interval", c.CheckInterval}} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive (got %s)", d.key, d.value))
		}
	}
	if c.WaitTimeout < 0 {
		errs = append(errs, fmt.Errorf("wait_timeout: must not be negative (got %s)", c.WaitTimeout))
	}
	if c.RenewBefore >= c.Validity {
		errs = append(errs, fmt.Errorf("renew_before: must be shorter than validity (got %s, validity %s); every check would reissue", c.RenewBefore, c.Validity))
	}
	if c.CheckInterval >= c.RenewBefore {
		errs = append(errs, fmt.Errorf("check_interval: must be shorter than renew_before (got %s, renew_before %s); a certificate could expire between checks", c.CheckInterval, c.RenewBefore))
	}
	if c.Validity > c.CAValidity {
		errs = append(errs, fmt.Errorf("validity: must not exceed ca_validity (got %s, ca_validity %s)", c.Validity, c.CAValidity))
	}
	if c.CARenewBefore < c.Validity {
		errs = append(errs, fmt.Errorf("ca_renew_before: must be at least validity (got %s, validity %s); a certificate issued before the new CA is made would outlive its CA", c.CARenewBefore, c.Validity))
	}
	if c.CARenewBefore >= c.CAValidity {
		errs = append(errs, fmt.Errorf("ca_renew_before: must be shorter than ca_validity (got %s, ca_validity %s); every check would make a new CA", c.CARenewBefore, c.CAValidity))
	}
	return errors.Join(errs...)
}
