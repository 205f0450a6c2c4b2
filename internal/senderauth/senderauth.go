// Package senderauth says who sent a request of flow records when a receiver,
// not a bearer token, vouches for the sender.
//
// The gateway's node_identity processor checks that a node collector reports
// only its own Node, from the collector's projected ServiceAccount token. An
// Antrea agent sends no such token: the antrea_flows receiver authenticates it
// by its client certificate, as Antrea's Flow Aggregator does, and marks the
// request's client.Info.Auth with AntreaAgent. Auth is set only by receivers
// in the collector itself, never from a request's headers, so a client cannot
// forge the mark.
package senderauth

import (
	"context"

	"go.opentelemetry.io/collector/client"
)

// AntreaAgent marks a request decoded by the antrea_flows receiver.
type AntreaAgent struct {
	// Transport is how the agent sent the records: tcp, tls or udp (IPFIX), or grpc.
	Transport string
}

var _ client.AuthData = AntreaAgent{}

// Attribute names of AntreaAgent.
const (
	AttrSender    = "flowtel.sender"
	AttrTransport = "flowtel.sender.transport"
	senderAntrea  = "antrea-agent"
)

// GetAttribute returns the named attribute: flowtel.sender is antrea-agent.
func (a AntreaAgent) GetAttribute(name string) any {
	switch name {
	case AttrSender:
		return senderAntrea
	case AttrTransport:
		return a.Transport
	}
	return nil
}

// GetAttributeNames lists the attributes GetAttribute answers.
func (AntreaAgent) GetAttributeNames() []string { return []string{AttrSender, AttrTransport} }

// WithAntreaAgent returns ctx with its client.Info (keeping the peer address)
// marked as an Antrea agent's.
func WithAntreaAgent(ctx context.Context, transport string) context.Context {
	info := client.FromContext(ctx)
	info.Auth = AntreaAgent{Transport: transport}
	return client.NewContext(ctx, info)
}

// IsAntreaAgent says whether ctx is a request an antrea_flows receiver marked.
func IsAntreaAgent(ctx context.Context) bool {
	_, ok := client.FromContext(ctx).Auth.(AntreaAgent)
	return ok
}
