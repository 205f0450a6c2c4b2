package antreaflowsreceiver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"
)

// Why a TLS client was refused (handshake_reason in metadata.yaml).
const (
	handshakeNoCertificate    = "no_certificate"
	handshakeUnknownAuthority = "unknown_authority"
	handshakeExpired          = "expired"
	handshakeBadCertificate   = "bad_certificate"
	handshakeOther            = "other"
)

// handshakeTimeout bounds a TLS handshake, so that a client that connects
// and says nothing does not hold a goroutine.
const handshakeTimeout = 10 * time.Second

// classifyHandshake maps a server handshake error of crypto/tls to a reason.
// Certificate verification errors are typed (x509's); a missing client
// certificate is a plain error, told by its text.
func classifyHandshake(err error) string {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var verr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown):
		return handshakeUnknownAuthority
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return handshakeExpired
	case errors.As(err, &invalid), errors.As(err, &verr):
		return handshakeBadCertificate
	case strings.Contains(err.Error(), "didn't provide a certificate"):
		return handshakeNoCertificate
	}
	return handshakeOther
}

func (r *antreaReceiver) handshakeFailed(ctx context.Context, remote net.Addr, err error) {
	reason := classifyHandshake(err)
	r.tel.ReceiverAntreaFlowsClientsRefused.Add(ctx, 1, handshakeAttrs[reason])
	r.set.Logger.Info("antrea_flows: TLS client refused", zap.Stringer("client", remote), zap.String("reason", reason), zap.Error(err))
}

// countingCreds are gRPC's TLS credentials with refused handshakes counted
// (gRPC itself only logs them at debug level).
type countingCreds struct {
	credentials.TransportCredentials
	r *antreaReceiver
}

func (c countingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.r.handshakeFailed(context.Background(), conn.RemoteAddr(), err)
	}
	return out, info, err
}

func (c countingCreds) Clone() credentials.TransportCredentials {
	return countingCreds{TransportCredentials: c.TransportCredentials.Clone(), r: c.r}
}
