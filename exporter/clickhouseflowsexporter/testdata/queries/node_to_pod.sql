-- Node → Pod flows (hostNetwork clients, kubelet probes, Node-local agents), which flowtel
-- reports with the source Node named (sourceEndpointKind = 'node').
SELECT
    sourceNodeName,
    destinationPodNamespace,
    destinationPodName,
    destinationTransportPort,
    count() AS records,
    sum(octetDeltaCount + reverseOctetDeltaCount) AS bytes
FROM flows
WHERE sourceEndpointKind = 'node' AND destinationPodName != ''
    AND flowEndSeconds >= now() - INTERVAL 1 HOUR
GROUP BY sourceNodeName, destinationPodNamespace, destinationPodName, destinationTransportPort
ORDER BY bytes DESC
LIMIT 20
