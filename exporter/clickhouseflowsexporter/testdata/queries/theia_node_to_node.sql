-- Theia's Node-to-Node view: bytes each way between Nodes, from flows_node_view.
SELECT
    sourceNodeName,
    destinationNodeName,
    sum(octetDeltaCount) AS bytes,
    sum(reverseOctetDeltaCount) AS reverse_bytes
FROM flows_node_view
WHERE sourceNodeName != '' AND destinationNodeName != ''
    AND flowEndSeconds >= now() - INTERVAL 1 HOUR
GROUP BY sourceNodeName, destinationNodeName
ORDER BY bytes DESC
