package antreaflowsreceiver

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// transportName is the transport attribute of metadata.yaml.
type transportName string

const (
	viaTCP  transportName = "tcp"
	viaTLS  transportName = "tls"
	viaUDP  transportName = "udp"
	viaGRPC transportName = "grpc"
)

var (
	transportAttrs = map[transportName]metric.AddOption{}
	refusalAttrs   = map[string]metric.AddOption{}
	handshakeAttrs = map[string]metric.AddOption{}

	dropConsumerError = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "consumer_error")))
	dropSequenceGap   = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "sequence_gap")))
	dropQueueFull     = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "queue_full")))
)

func init() {
	for _, t := range []transportName{viaTCP, viaTLS, viaUDP, viaGRPC} {
		transportAttrs[t] = metric.WithAttributeSet(attribute.NewSet(attribute.String("transport", string(t))))
	}
	for _, r := range []string{reasonMalformedMessage, reasonUnknownTemplate, reasonMalformedRecord, reasonNoNode, reasonNoEnd, reasonTemplateLimit, reasonExporterLimit, reasonOversizeRequest} {
		refusalAttrs[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
	}
	for _, r := range []string{handshakeNoCertificate, handshakeUnknownAuthority, handshakeExpired, handshakeBadCertificate, handshakeOther} {
		handshakeAttrs[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
	}
}

func (t transportName) attr() metric.AddOption { return transportAttrs[t] }

func refusalAttr(reason string) metric.AddOption { return refusalAttrs[reason] }
