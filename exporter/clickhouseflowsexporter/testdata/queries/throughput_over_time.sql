-- Cluster throughput per minute over the last hour, in bits per second.
SELECT
    toStartOfMinute(flowEndSeconds) AS minute,
    sum(octetDeltaCount + reverseOctetDeltaCount) * 8 / 60 AS bits_per_second
FROM flows
WHERE flowEndSeconds >= now() - INTERVAL 1 HOUR
GROUP BY minute
ORDER BY minute
