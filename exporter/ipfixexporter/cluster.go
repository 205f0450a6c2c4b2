package ipfixexporter

import (
	"errors"
	"hash/fnv"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
)

// attrClusterUID is the resource attribute holding the cluster's UUID.
const attrClusterUID = "k8s.cluster.uid"

func parseClusterUUID(s string) ([16]byte, error) {
	var u [16]byte
	if !layout.ParseUUID(s, u[:]) {
		return u, errors.New("not a UUID")
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
