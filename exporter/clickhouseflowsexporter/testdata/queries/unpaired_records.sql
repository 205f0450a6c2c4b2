-- Records the gateway exported unpaired (one Node's half never arrived within the pairing
-- timeout), per flow type and Node pair: a persistent count points at a Node whose
-- collector is missing or misrouted.
SELECT
    flowType,
    sourceNodeName,
    destinationNodeName,
    count() AS records
FROM flows
WHERE correlationState = 'unpaired' AND flowEndSeconds >= now() - INTERVAL 1 HOUR
GROUP BY flowType, sourceNodeName, destinationNodeName
ORDER BY records DESC, sourceNodeName, destinationNodeName
