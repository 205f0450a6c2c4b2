package ipfixexporter

import (
	"errors"
	"hash/fnv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
)

// attrClusterUID is the resource attribute holding the cluster's UUID.
const attrClusterUID = "k8s.cluster.uid"

func parseClusterUUID(s string) ([16]byte, error) {
	var u [16]byte
	if !layout.ParseUUID(s, u[:]) {
		return u, errors.New("not a UUID in the 8-4-4-4-12 hex form")
	}
	return u, nil
}

// observationDomain derives Antrea's default Observation Domain ID: the FNV-1
// 32-bit hash of the cluster UUID's 16 bytes. A cluster UID that is not a UUID
// is hashed as text; no cluster UID at all gives domain 0.
func observationDomain(clusterUUID string) uint32 {
	if clusterUUID == "" {
		return 0
	}
	h := fnv.New32()
	if u, err := parseClusterUUID(clusterUUID); err == nil {
		h.Write(u[:])
	} else {
		h.Write([]byte(clusterUUID))
	}
	return h.Sum32()
}

// clusterOf returns the cluster UUID, the Observation Domain ID and the
// clusterId value for records under resource res.
func (e *ipfixExporter) clusterOf(res pcommon.Resource) (odid uint32, clusterID string) {
	uuid := e.cfg.ClusterUUID
	if uuid == "" {
		if v, ok := res.Attributes().Get(attrClusterUID); ok {
			uuid = v.AsString()
		}
	}
	clusterID = e.cfg.ClusterID
	if clusterID == "" {
		clusterID = uuid
	}
	if e.cfg.ObservationDomainID != nil {
		return *e.cfg.ObservationDomainID, clusterID
	}
	if uuid == e.lastUUID {
		return e.lastODID, clusterID
	}
	e.lastUUID, e.lastODID = uuid, observationDomain(uuid)
	return e.lastODID, clusterID
}
