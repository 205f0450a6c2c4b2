package k8sflowprocessor

import (
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// nameCluster puts the cluster's identity, k8s.cluster.uid (cluster_uid, or
// the kube-system Namespace's UID), on rl's resource once it is known, so the
// exporters name the cluster (ClickHouse clusterUUID, the IPFIX observation
// domain and clusterId) without being configured.
func (p *k8sFlowProcessor) nameCluster(rl plog.ResourceLogs) {
	if uid := p.cluster.UID(); uid != "" {
		rl.Resource().Attributes().PutStr(catalogue.ResourceClusterUID, uid)
	}
}
