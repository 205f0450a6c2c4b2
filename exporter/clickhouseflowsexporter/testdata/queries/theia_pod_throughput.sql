-- Theia's per-Pod throughput over time: per minute and source Pod, bits per second from the
-- byte deltas, and the mean of the throughput column, from flows_pod_view. (Grafana's
-- $__timeInterval is toStartOfInterval, which ClickHouse 18.16 lacks: toStartOfMinute here.)
SELECT
    toStartOfMinute(flowEndSeconds) AS time,
    concat(sourcePodNamespace, '/', sourcePodName) AS pod,
    sum(octetDeltaCount) * 8 / 60 AS bits_per_second,
    avg(throughput) AS mean_throughput
FROM flows_pod_view
WHERE flowType IN (1, 2) AND sourcePodName != ''
    AND flowEndSeconds >= now() - INTERVAL 1 HOUR
GROUP BY time, pod
ORDER BY time, pod
