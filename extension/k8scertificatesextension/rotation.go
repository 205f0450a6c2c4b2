package k8scertificatesextension

import (
	"bytes"
	"crypto/x509"
	"time"
)

// Keys of a CA Secret (<name>-ca-key) besides ca.crt and ca.key, the CA that
// signs: the CA that signs next (made ahead, published, not signing yet) and
// the CA that signed before (still trusted until it expires).
const (
	keyNextCert     = "next.crt"
	keyNextKey      = "next.key"
	keyPreviousCert = "previous.crt"
)

// caSet is what a CA Secret holds.
type caSet struct {
	active      keyPair
	next        *keyPair
	previous    *x509.Certificate
	previousPEM []byte
}

// parseCASet reads a CA Secret's data. The active pair must parse; a next
// pair or previous certificate that does not is left out (the next write
// drops it).
func parseCASet(data map[string][]byte) (caSet, error) {
	active, err := parseKeyPair(data[keyCACert], data[keyCAKey])
	if err != nil {
		return caSet{}, err
	}
	s := caSet{active: active}
	if next, err := parseKeyPair(data[keyNextCert], data[keyNextKey]); err == nil {
		s.next = &next
	}
	if prev, err := parseCertificate(data[keyPreviousCert]); err == nil {
		s.previous, s.previousPEM = prev, data[keyPreviousCert]
	}
	return s, nil
}

// data is the CA Secret's content for s.
func (s caSet) data() map[string][]byte {
	d := map[string][]byte{keyCACert: s.active.certPEM, keyCAKey: s.active.keyPEM}
	if s.next != nil {
		d[keyNextCert], d[keyNextKey] = s.next.certPEM, s.next.keyPEM
	}
	if s.previous != nil {
		d[keyPreviousCert] = s.previousPEM
	}
	return d
}

// bundle is the trust bundle of the hop: the CA that signs, then the one that
// will (so peers trust it before any leaf chains to it), then the one that
// did (so peers keep trusting leaves not yet reissued).
func (s caSet) bundle() []byte {
	b := bytes.Clone(s.active.certPEM)
	if s.next != nil {
		b = append(b, s.next.certPEM...)
	}
	if s.previous != nil {
		b = append(b, s.previousPEM...)
	}
	return b
}

// caSchedule is when CAs are made and switched.
type caSchedule struct {
	// caValidity is how long a new CA lasts.
	caValidity time.Duration
	// caRenewBefore: a CA with less left gets a successor, published at once.
	caRenewBefore time.Duration
	// leafValidity is how long a leaf lasts: a CA with less left cannot
	// sign a full one, so its successor takes over signing then.
	leafValidity time.Duration
}

// rotation says what rotate changed, for the log.
type rotation string

const (
	rotationNone      rotation = ""
	rotationMade      rotation = "made"       // there was no readable CA
	rotationNext      rotation = "next"       // a successor was made and published
	rotationSwitched  rotation = "switched"   // the successor signs now; the old CA stays trusted
	rotationReplaced  rotation = "replaced"   // the CA had expired: a new one signs, the old is dropped
	rotationDropped   rotation = "dropped"    // the previous CA expired and left the bundle
	rotationNextStale rotation = "next_stale" // an unusable successor was dropped
)

// rotate returns the CA set a Secret should hold at now, given what it
// holds (nil: nothing readable), and what changed (rotationNone: keep cur).
//
// A CA's life ends in three steps. ca_renew_before before its expiry a
// successor is made and published beside it; leaves stay signed by the old
// CA, which can still sign full-length leaves. When the old CA has less than
// a leaf's validity left, the successor signs, every leaf is reissued by it,
// and the old CA stays in the bundle as previous. When the old CA expires, it
// leaves the bundle: nothing valid chains to it any more.
func rotate(cur *caSet, commonName string, now time.Time, s caSchedule) (caSet, rotation, error) {
	if cur == nil {
		ca, err := newCA(commonName, now, s.caValidity)
		return caSet{active: ca}, rotationMade, err
	}
	set := *cur
	what := rotationNone
	if set.previous != nil && !now.Before(set.previous.NotAfter) {
		set.previous, set.previousPEM, what = nil, nil, rotationDropped
	}
	if set.next != nil && set.next.cert.NotAfter.Sub(now) <= s.caRenewBefore {
		// A successor that would itself need renewal (ca_validity shortened,
		// or left unswitched too long) is no successor.
		set.next, what = nil, rotationNextStale
	}
	successor := func() (keyPair, error) {
		if set.next != nil {
			return *set.next, nil
		}
		return newCA(commonName, now, s.caValidity)
	}
	left := set.active.cert.NotAfter.Sub(now)
	switch {
	case left <= 0:
		next, err := successor()
		if err != nil {
			return caSet{}, rotationNone, err
		}
		return caSet{active: next}, rotationReplaced, nil
	case left <= s.leafValidity:
		next, err := successor()
		if err != nil {
			return caSet{}, rotationNone, err
		}
		return caSet{active: next, previous: set.active.cert, previousPEM: set.active.certPEM}, rotationSwitched, nil
	case left <= s.caRenewBefore && set.next == nil:
		next, err := newCA(commonName, now, s.caValidity)
		if err != nil {
			return caSet{}, rotationNone, err
		}
		set.next = &next
		return set, rotationNext, nil
	}
	return set, what, nil
}

// expiring reports whether a CA that signs, expiring at notAfter, is expired
// or within ca_renew_before of expiry at now: a check that could not renew it
// reports so.
func (s caSchedule) expiring(notAfter, now time.Time) bool {
	return notAfter.Sub(now) <= s.caRenewBefore
}
