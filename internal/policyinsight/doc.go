// Package policyinsight answers two questions about a cluster's network
// policies from the connections flowtel recorded:
//
//   - What if a draft were applied? WhatIf evaluates every recorded
//     connection against the cluster's NetworkPolicies,
//     AdminNetworkPolicies and BaselineAdminNetworkPolicies as they stand
//     (a Snapshot) and as they would stand with the draft's objects
//     created, changed or deleted, and returns the connections whose
//     verdict would change, grouped by workload pair and port, each with
//     the rule that decides it.
//   - Which policies would admit exactly what ran? Recommend writes
//     least-privilege NetworkPolicies (or AdminNetworkPolicies) for one
//     Namespace's workloads from its recorded connections; WhatIf over the
//     same connections verifies them (no connection newly denied).
//
// Evaluation is internal/netpol's, for one connection in one direction.
// Both sides of a what-if use the policies as they stand now (a Snapshot
// answers the same at every time), not as they stood when each connection
// started: the question is what the draft changes, and the recorded
// policy verdicts already say what happened then. The Pods' labels are the
// ones recorded with each connection (the flows table's sourcePodLabels and
// destinationPodLabels), as they were when it ran; for a workload none of
// whose records carry labels (k8s_flow's pod_labels off, as shipped),
// ResolveLabels takes its current ones from the API server.
//
// The package holds no connection to ClickHouse: flowctl (cmd/flowctl,
// policy.go) reads the rows and hands them here, with a client of the API
// server for Load and ResolveLabels, as tests and a future UI can.
package policyinsight
