-- Theia's NetworkPolicy view: bytes allowed and denied (Drop or Reject) per ingress policy,
-- from flows_policy_view.
SELECT
    if(ingressNetworkPolicyNamespace != '',
        concat(ingressNetworkPolicyNamespace, '/', ingressNetworkPolicyName),
        ingressNetworkPolicyName) AS policy,
    multiIf(ingressNetworkPolicyRuleAction = 1, 'allow',
        ingressNetworkPolicyRuleAction IN (2, 3), 'deny', 'none') AS verdict,
    sum(octetDeltaCount + reverseOctetDeltaCount) AS bytes
FROM flows_policy_view
WHERE ingressNetworkPolicyName != '' AND flowEndSeconds >= now() - INTERVAL 1 HOUR
GROUP BY policy, verdict
ORDER BY verdict, policy
