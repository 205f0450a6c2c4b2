-- Theia's Pod-to-Pod Sankey: bytes per source → destination pair (namespace/Pod:port), from
-- flows_pod_view, without the system namespaces; Grafana's time filter written out.
SELECT
    concat(sourcePodNamespace, '/', sourcePodName, ':', toString(sourceTransportPort)) AS source,
    concat(destinationPodNamespace, '/', destinationPodName, ':', toString(destinationTransportPort)) AS destination,
    sum(octetDeltaCount) AS bytes
FROM flows_pod_view
WHERE flowType IN (1, 2)
    AND sourcePodNamespace NOT IN ('kube-system', 'flow-visibility', 'flow-aggregator')
    AND destinationPodNamespace NOT IN ('kube-system', 'flow-visibility', 'flow-aggregator')
    AND flowEndSeconds >= now() - INTERVAL 1 HOUR
GROUP BY source, destination
ORDER BY bytes DESC
LIMIT 50
