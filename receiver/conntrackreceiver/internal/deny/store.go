package deny

import (
	"net/netip"
	"sync"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Verdict is what the logged packet's rule did, read from its NFLOG prefix
// (see ParsePrefix).
type Verdict struct {
	// Action is Drop or Reject.
	Action flowrecord.RuleAction
	// Egress: the rule enforces the source's egress policy; otherwise the
	// destination's ingress policy.
	Egress bool
}

// ParsePrefix reads a rule's verdict from its --nflog-prefix. The prefix is
// read as words (runs of letters, case ignored); "reject" makes the action
// Reject, else it is Drop; "egress" makes it an egress verdict, else ingress.
// Other words are ignored, so "flowtel drop egress", "REJECT ingress" and
// "kube-router: egress" all read.
func ParsePrefix(p []byte) Verdict {
	v := Verdict{Action: flowrecord.RuleActionDrop}
	for i := 0; i < len(p); {
		for i < len(p) && !isLetter(p[i]) {
			i++
		}
		j := i
		for j < len(p) && isLetter(p[j]) {
			j++
		}
		switch word := p[i:j]; {
		case equalFold(word, "reject"):
			v.Action = flowrecord.RuleActionReject
		case equalFold(word, "egress"):
			v.Egress = true
		}
		i = j
	}
	return v
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// equalFold compares an ASCII word with a lower-case one without allocating.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != s[i] {
			return false
		}
	}
	return true
}

// Outcome is what became of one logged packet.
type Outcome uint8

const (
	// Accounted: added to its denied connection.
	Accounted Outcome = iota
	// RateLimited: over max_rate, not accounted.
	RateLimited
	// MaxRecords: a new 5-tuple while max_records connections are held.
	MaxRecords
	// Undecodable: not a well-formed IPv4 or IPv6 packet.
	Undecodable
)

// Config bounds the store.
type Config struct {
	// IdleTimeout: a connection with no packet for this long is exported
	// (its packets not yet reported); it then lingers (see Linger).
	IdleTimeout time.Duration
	// Linger is how long after its last packet a connection is
	// remembered, by protocol. The zero value is DefaultLinger; a linger not
	// longer than IdleTimeout forgets a connection at its idle export.
	Linger Linger
	// ActiveTimeout: a connection still receiving packets is exported this
	// long after its previous export (its deltas since), and kept.
	ActiveTimeout time.Duration
	// MaxRecords bounds the connections held, lingering ones included (0:
	// no bound). A new 5-tuple at the bound takes the place of the
	// connection that began lingering first, if any.
	MaxRecords int
	// MaxRate bounds the packets accounted per second, with a burst of one
	// second's worth (0: no bound).
	MaxRate int
}

// Linger is how long a denied connection's identity (its start and totals)
// outlives its last packet, by protocol: as long as the source Node's
// conntrack keeps the entry of the same connection attempt, which is never
// answered, so that a retry within it is the same connection at both ends.
// A packet within the linger continues the connection (same start, totals
// growing, deltas of the new packets); one after it starts a new one, as
// the source Node's conntrack then does too.
type Linger struct {
	// TCP: an unanswered SYN's entry, nf_conntrack_tcp_timeout_syn_sent.
	TCP time.Duration
	// UDP (and UDP-Lite): an unreplied entry, nf_conntrack_udp_timeout.
	UDP time.Duration
	// ICMP and ICMPv6: nf_conntrack_icmp_timeout (nf_conntrack_icmpv6_timeout
	// has the same default).
	ICMP time.Duration
	// SCTP: an unanswered INIT's entry (COOKIE_WAIT),
	// nf_conntrack_sctp_timeout_cookie_wait.
	SCTP time.Duration
	// Other protocols: nf_conntrack_generic_timeout.
	Other time.Duration
}

// DefaultLinger is the kernel's default conntrack timeouts for those entries.
var DefaultLinger = Linger{
	TCP: 120 * time.Second, UDP: 30 * time.Second, ICMP: 30 * time.Second,
	SCTP: 3 * time.Second, Other: 600 * time.Second,
}

// of is the linger of protocol proto.
func (l *Linger) of(proto uint8) time.Duration {
	switch proto {
	case 6:
		return l.TCP
	case 17, 136:
		return l.UDP
	case protoICMP, protoICMPv6:
		return l.ICMP
	case 132:
		return l.SCTP
	}
	return l.Other
}

// Conntrack is what the logged packet's conntrack entry (not confirmed: the
// packet was dropped) said, when the kernel sent it.
type Conntrack struct {
	// OrigDst/OrigDstPort are the pre-DNAT destination (a ClusterIP when
	// the packet was DNATed before the rule dropped it).
	OrigDst     netip.Addr
	OrigDstPort uint16
	Zone        uint16
	Mark        uint32
	// Labels is ct_label, big-endian.
	Labels [16]byte
}

// Conn is one denied connection.
type Conn struct {
	Key
	Verdict
	// Conntrack is from the connection's first packet; OrigDst is the
	// packet's destination when the kernel sent no conntrack entry.
	Conntrack
	// Start is the first packet's arrival, Last the latest's.
	Start, Last time.Time
	// Packets and Bytes are the totals since Start.
	Packets, Bytes uint64

	exportedPackets, exportedBytes uint64
	lastExport                     time.Time
	// lingering: exported idle, remembered until Last plus its linger, in
	// the store's lingering list (prev, next), oldest first.
	lingering  bool
	prev, next *Conn
}

// Export is one record due: the connection as it is, and its counters since
// its previous export.
type Export struct {
	Conn
	PacketDelta, OctetDelta uint64
}

// Store holds the denied connections. Add runs on the NFLOG goroutine,
// Expired and Flush on the export loop: it locks.
type Store struct {
	cfg Config

	mu     sync.Mutex
	conns  map[Key]*Conn
	tokens float64
	refill time.Time
	// oldest and newest are the ends of the lingering list; lingering
	// counts it; evicted counts the lingering connections forgotten early
	// for a new 5-tuple under MaxRecords.
	oldest, newest *Conn
	lingering      int
	evicted        uint64
}

// New returns an empty store.
func New(cfg Config) *Store {
	if cfg.Linger == (Linger{}) {
		cfg.Linger = DefaultLinger
	}
	return &Store{cfg: cfg, conns: make(map[Key]*Conn), tokens: float64(cfg.MaxRate)}
}

// Add accounts one logged packet that arrived at now; ct is its conntrack
// entry (nil: none).
func (s *Store) Add(payload, prefix []byte, ct *Conntrack, now time.Time) Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.take(now) {
		return RateLimited
	}
	k, length, ok := parse(payload)
	if !ok {
		return Undecodable
	}
	c := s.conns[k]
	switch {
	case c != nil && c.lingering:
		s.unlink(c) // the same connection, going on
	case c == nil:
		if s.cfg.MaxRecords > 0 && len(s.conns) >= s.cfg.MaxRecords {
			if s.oldest == nil {
				return MaxRecords
			}
			old := s.oldest
			s.unlink(old)
			delete(s.conns, old.Key)
			s.evicted++
		}
		c = &Conn{Key: k, Verdict: ParsePrefix(prefix), Start: now, lastExport: now}
		if ct != nil {
			c.Conntrack = *ct
		}
		if !c.OrigDst.IsValid() {
			c.OrigDst, c.OrigDstPort = k.Dst, k.DstPort
		}
		s.conns[k] = c
	}
	c.Last = now
	c.Packets++
	c.Bytes += length
	return Accounted
}

// take spends one token of the rate bound, refilled at MaxRate per second.
func (s *Store) take(now time.Time) bool {
	if s.cfg.MaxRate <= 0 {
		return true
	}
	rate := float64(s.cfg.MaxRate)
	if !s.refill.IsZero() {
		s.tokens = min(rate, s.tokens+now.Sub(s.refill).Seconds()*rate)
	}
	s.refill = now
	if s.tokens < 1 {
		return false
	}
	s.tokens--
	return true
}

// Expired appends to out the records due at now: idle connections (which
// then linger, or are forgotten if their linger is over) and connections
// whose active timeout passed with new packets. Lingering connections whose
// linger is over are forgotten.
func (s *Store) Expired(now time.Time, out []Export) []Export {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.conns {
		idle := now.Sub(c.Last)
		switch {
		case c.lingering:
			if idle >= s.cfg.Linger.of(k.Proto) {
				s.unlink(c)
				delete(s.conns, k)
			}
		case idle >= s.cfg.IdleTimeout:
			out = c.export(now, out)
			if idle >= s.cfg.Linger.of(k.Proto) {
				delete(s.conns, k)
			} else {
				s.link(c)
			}
		case now.Sub(c.lastExport) >= s.cfg.ActiveTimeout:
			out = c.export(now, out)
		}
	}
	return out
}

// Flush appends every connection's unexported packets to out and forgets
// them all (shutdown).
func (s *Store) Flush(now time.Time, out []Export) []Export {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.conns {
		out = c.export(now, out)
		delete(s.conns, k)
	}
	s.oldest, s.newest, s.lingering = nil, nil, 0
	return out
}

// Len is the number of connections held, lingering ones included.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Lingering is the number of connections held that are lingering.
func (s *Store) Lingering() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lingering
}

// Evicted is the number of lingering connections forgotten so far before
// their linger was over, to hold a new 5-tuple under MaxRecords: a later
// packet of one starts a new connection.
func (s *Store) Evicted() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evicted
}

// link appends c to the lingering list.
func (s *Store) link(c *Conn) {
	c.lingering, c.prev, c.next = true, s.newest, nil
	if s.newest != nil {
		s.newest.next = c
	} else {
		s.oldest = c
	}
	s.newest = c
	s.lingering++
}

// unlink takes c, lingering, out of the lingering list.
func (s *Store) unlink(c *Conn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		s.oldest = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		s.newest = c.prev
	}
	c.lingering, c.prev, c.next = false, nil, nil
	s.lingering--
}

// export appends the connection's record if it has packets its previous
// export did not carry.
func (c *Conn) export(now time.Time, out []Export) []Export {
	c.lastExport = now
	if c.Packets == c.exportedPackets {
		return out
	}
	x := Export{Conn: *c, PacketDelta: c.Packets - c.exportedPackets, OctetDelta: c.Bytes - c.exportedBytes}
	x.prev, x.next = nil, nil
	out = append(out, x)
	c.exportedPackets, c.exportedBytes = c.Packets, c.Bytes
	return out
}
