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
	// and forgotten.
	IdleTimeout time.Duration
	// ActiveTimeout: a connection still receiving packets is exported this
	// long after its previous export (its deltas since), and kept.
	ActiveTimeout time.Duration
	// MaxRecords bounds the connections held (0: no bound).
	MaxRecords int
	// MaxRate bounds the packets accounted per second, with a burst of one
	// second's worth (0: no bound).
	MaxRate int
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
}

// New returns an empty store.
func New(cfg Config) *Store {
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
	if c == nil {
		if s.cfg.MaxRecords > 0 && len(s.conns) >= s.cfg.MaxRecords {
			return MaxRecords
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

// Expired appends to out the records due at now: idle connections (then
// forgotten) and connections whose active timeout passed with new packets.
func (s *Store) Expired(now time.Time, out []Export) []Export {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.conns {
		switch {
		case now.Sub(c.Last) >= s.cfg.IdleTimeout:
			out = c.export(now, out)
			delete(s.conns, k)
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
	return out
}

// Len is the number of connections held.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// export appends the connection's record if it has packets its previous
// export did not carry.
func (c *Conn) export(now time.Time, out []Export) []Export {
	c.lastExport = now
	if c.Packets == c.exportedPackets {
		return out
	}
	out = append(out, Export{Conn: *c, PacketDelta: c.Packets - c.exportedPackets, OctetDelta: c.Bytes - c.exportedBytes})
	c.exportedPackets, c.exportedBytes = c.Packets, c.Bytes
	return out
}
