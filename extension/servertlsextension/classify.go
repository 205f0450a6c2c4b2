package servertlsextension

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Outcomes and reasons of a handshake (the outcome and refusal_reason enums
// of metadata.yaml).
const (
	outcomeAccepted = "accepted"
	outcomeRefused  = "refused"

	reasonNoCertificate    = "no_certificate"
	reasonUnknownAuthority = "unknown_authority"
	reasonExpired          = "expired"
	reasonBadCertificate   = "bad_certificate"
	reasonOther            = "other"
)

var (
	accepted = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", outcomeAccepted)))
	refusals = map[string]metric.AddOption{}
)

func init() {
	for _, r := range []string{reasonNoCertificate, reasonUnknownAuthority, reasonExpired, reasonBadCertificate, reasonOther} {
		refusals[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", outcomeRefused), attribute.String("reason", r)))
	}
}

// refusal is why a handshake failed, and the subject of the client
// certificate it failed on, when there was one.
type refusal struct {
	reason  string
	subject string
}

// classify maps a server handshake error of crypto/tls to a reason. crypto/tls
// types the errors of certificate verification (x509's, wrapped in a
// CertificateVerificationError); a missing client certificate and the other
// checks of a certificate are plain errors, told apart by their text.
func classify(err error) refusal {
	var r refusal
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) && len(verr.UnverifiedCertificates) > 0 {
		r.subject = verr.UnverifiedCertificates[0].Subject.String()
	}
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	msg := err.Error()
	switch {
	case errors.As(err, &unknown):
		r.reason = reasonUnknownAuthority
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		r.reason = reasonExpired
	case verr != nil:
		r.reason = reasonBadCertificate
	case strings.Contains(msg, "didn't provide a certificate"):
		r.reason = reasonNoCertificate
	case strings.Contains(msg, "client certificate"): // unparsable, bad signature, unsupported key
		r.reason = reasonBadCertificate
	default:
		r.reason = reasonOther
	}
	return r
}
