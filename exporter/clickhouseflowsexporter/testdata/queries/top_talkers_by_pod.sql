-- Top talkers by source Pod over the last hour: bytes in both directions.
SELECT
    sourcePodNamespace,
    sourcePodName,
    sum(octetDeltaCount + reverseOctetDeltaCount) AS bytes
FROM flows
WHERE sourcePodName != '' AND flowEndSeconds >= now() - INTERVAL 1 HOUR
GROUP BY sourcePodNamespace, sourcePodName
ORDER BY bytes DESC, sourcePodNamespace, sourcePodName
LIMIT 10
