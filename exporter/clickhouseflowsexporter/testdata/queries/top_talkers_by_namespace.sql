-- Top namespace pairs over the last hour ('' is a Node or an external address).
SELECT
    sourcePodNamespace,
    destinationPodNamespace,
    count() AS records,
    sum(octetDeltaCount + reverseOctetDeltaCount) AS bytes
FROM flows
WHERE flowEndSeconds >= now() - INTERVAL 1 HOUR
GROUP BY sourcePodNamespace, destinationPodNamespace
ORDER BY bytes DESC, sourcePodNamespace, destinationPodNamespace
LIMIT 10
