package k8sflowprocessor

import (
	"errors"
	"fmt"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord/recordform"
	"github.com/flowtel/flowtel/internal/k8sindex"
)

// Pod scopes.
const (
	PodsLocal = "local" // only this Node's Pods (spec.nodeName field selector)
	PodsAll   = "all"   // every Pod: a gateway, or a small cluster
)

// Defaults of the hold of records whose local endpoint is not resolved yet.
const (
	DefaultHoldUnresolved = 5 * time.Second
	DefaultHoldMaxRecords = 10000
)

// Encodings of the records k8s_flow emits (architecture decision D13).
const (
	// EncodingAttributes is the public schema (docs/flow-schema.md): one
	// attribute a field, what any pipeline and exporter can read.
	EncodingAttributes = recordform.Attributes
	// EncodingCompact is flowtel's own hop to its gateways: flow.key and the
	// record as bytes in the Body (flowtel.record.encoding compact/1), which
	// only flowtel's components read.
	EncodingCompact = recordform.Compact
)

// NodeNameEnv is the environment variable node_name defaults to (set it from
// the downward API: fieldRef spec.nodeName).
const NodeNameEnv = "K8S_NODE_NAME"

// Config is the k8s_flow processor's configuration.
type Config struct {
	// NodeName is the Node this collector runs on; records are classified
	// from its point of view. Defaults to $K8S_NODE_NAME. Required with
	// pods: local; with pods: all and no node_name, each record's
	// reporter Node (set by the receiver) is used.
	NodeName string `mapstructure:"node_name"`
	// Pods is which Pods are watched: local (default) or all.
	Pods string `mapstructure:"pods"`
	// PodLabels adds Pod labels to Pod endpoints (default false, as Antrea's agent).
	PodLabels bool `mapstructure:"pod_labels"`
	// auth_type, kubeconfig, wait_for_sync, wait_for_sync_timeout and
	// deleted_pod_retention, as flow_correlation's kubernetes section.
	k8sindex.Settings `mapstructure:",squash"`
	// ClusterUID is written to every record's resource as k8s.cluster.uid.
	// Empty: the UID of the kube-system Namespace, read once at start.
	ClusterUID string `mapstructure:"cluster_uid"`
	// HoldUnresolved is how long a record with an endpoint in this Node's
	// podCIDR that no known Pod owns is held back and resolved again before
	// it is exported unresolved: a Pod's IP reaches the API after the
	// kubelet's next status update, often after its first connections.
	// 0 exports such records at once.
	HoldUnresolved time.Duration `mapstructure:"hold_unresolved"`
	// HoldMaxRecords bounds the records held at once; a record that finds
	// the hold full is exported unresolved at once (counted as shed).
	HoldMaxRecords int `mapstructure:"hold_max_records"`
	// NetworkPolicies names, in each record, the Kubernetes NetworkPolicy
	// and rule that admitted the connection on this Node's Pod's side(s),
	// evaluated as the policies and labels stood at its start (decision
	// D12). It watches NetworkPolicies, Namespaces and, with pods: local,
	// every Pod's labels and named ports cluster-wide (for rule peers).
	NetworkPolicies bool `mapstructure:"network_policies"`
	// Encoding is how records leave the processor: attributes (default, the
	// public schema) or compact (for a pipeline whose only consumer is the
	// load_balancing exporter in front of flowtel gateways, which read it
	// and emit the attribute form; decision D13).
	Encoding string `mapstructure:"encoding"`

	_ struct{}
}

// Validate checks the configuration; each error names the key, what is wrong
// with it and how to fix it.
func (c *Config) Validate() error {
	var errs []error
	switch c.Pods {
	case PodsLocal:
		if c.NodeName == "" {
			errs = append(errs, fmt.Errorf("node_name: required with pods: %s (got none); set it, or the %s environment variable, to the Node this collector runs on", PodsLocal, NodeNameEnv))
		}
	case PodsAll:
	default:
		errs = append(errs, fmt.Errorf("pods: unknown scope (got %q); set %s (this Node's Pods) or %s (every Pod)", c.Pods, PodsLocal, PodsAll))
	}
	errs = c.Check(errs)
	if c.HoldUnresolved < 0 {
		errs = append(errs, fmt.Errorf("hold_unresolved: must not be negative (got %v); set a duration such as %v, or 0 to export unresolved records at once", c.HoldUnresolved, DefaultHoldUnresolved))
	}
	if c.HoldUnresolved > 0 && c.HoldMaxRecords <= 0 {
		errs = append(errs, fmt.Errorf("hold_max_records: must be positive when hold_unresolved is set (got %d); set a number such as %d, or hold_unresolved: 0", c.HoldMaxRecords, DefaultHoldMaxRecords))
	}
	if err := recordform.Check(c.Encoding, "flowtel gateways"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
