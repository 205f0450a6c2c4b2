package antreaflowsreceiver

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"
)

// templateLimits bound the templates the receiver keeps: per session, and
// in total over all sessions (total is shared by the receiver's sessions).
type templateLimits struct {
	perSession int
	max        int64
	total      atomic.Int64
}

// session holds the templates one exporter announced: on TCP and TLS its
// connection, on UDP its source address. Templates are scoped by
// observation domain, as RFC 7011 scopes them.
type session struct {
	templates map[uint64]*template
	// announced is when each template was last sent (UDP: they expire).
	announced map[uint64]time.Time
	ttl       time.Duration // 0: templates live as long as the session
	lastSeen  time.Time
	// records is the scratch the message's records are decoded into: each
	// data record's IEs straight into its Record, through the catalogue.
	records []agentRecord
	limits  *templateLimits // nil: unbounded (tests of the decoder alone)
	// seq follows the exporter's sequence numbers (UDP).
	seq sequences
}

func newSession(ttl time.Duration) *session {
	return &session{templates: make(map[uint64]*template), announced: make(map[uint64]time.Time), ttl: ttl}
}

func newBoundedSession(ttl time.Duration, limits *templateLimits) *session {
	s := newSession(ttl)
	s.limits = limits
	return s
}

// forget drops a template the session holds.
func (s *session) forget(k uint64) {
	if _, ok := s.templates[k]; !ok {
		return
	}
	delete(s.templates, k)
	delete(s.announced, k)
	if s.limits != nil {
		s.limits.total.Add(-1)
	}
}

// close gives the session's templates back to the total.
func (s *session) close() {
	if s.limits != nil {
		s.limits.total.Add(-int64(len(s.templates)))
	}
	clear(s.templates)
	clear(s.announced)
}

// learn keeps t under k unless a bound is reached (a template announced
// again always replaces its old self).
func (s *session) learn(k uint64, t *template, now time.Time) error {
	if _, ok := s.templates[k]; !ok && s.limits != nil {
		if len(s.templates) >= s.limits.perSession {
			return fmt.Errorf("template %d: the session holds %d templates, ipfix.max_templates_per_session", uint16(k), len(s.templates))
		}
		if s.limits.total.Add(1) > s.limits.max {
			s.limits.total.Add(-1)
			return fmt.Errorf("template %d: the receiver holds %d templates, ipfix.max_templates", uint16(k), s.limits.max)
		}
	}
	s.templates[k] = t
	s.announced[k] = now
	return nil
}

func templateKey(domain uint32, id uint16) uint64 { return uint64(domain)<<16 | uint64(id) }

// messageResult is what decoding one message produced: the records to
// deliver, and what was refused inside it.
type messageResult struct {
	header  msgHeader
	records []agentRecord
	// framed is the data records the message holds, delivered or refused;
	// unframed says some could not be counted (a data set of an unknown
	// template, a record that does not fit its set).
	framed   int
	unframed bool
	refused  map[string]int
	firstErr error
}

func (m *messageResult) refuse(reason string, err error) {
	if m.refused == nil {
		m.refused = make(map[string]int, 1)
	}
	m.refused[reason]++
	if m.firstErr == nil {
		m.firstErr = err
	}
}

// decode reads one whole IPFIX message. A message whose structure cannot be
// read returns an error (errMalformed) and nothing of it is kept: its
// templates are not learnt either. Otherwise each data set of an unknown
// template, and each record that does not fit its template, is refused on
// its own and the rest kept.
func (s *session) decode(msg []byte, now time.Time) (messageResult, error) {
	s.lastSeen = now
	h, err := readHeader(msg)
	if err != nil {
		return messageResult{}, err
	}
	if int(h.length) != len(msg) {
		return messageResult{}, malformed("header length %d, message of %d bytes", h.length, len(msg))
	}
	// Validate the whole message's set structure before learning anything.
	body := msg[msgHeaderLen:]
	for b := body; len(b) > 0; {
		if len(b) < setHeaderLen {
			return messageResult{}, malformed("%d bytes after the last set, shorter than a set header", len(b))
		}
		id, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if n < setHeaderLen || n > len(b) {
			return messageResult{}, malformed("set %d of length %d in %d bytes", id, n, len(b))
		}
		if id != templateSetID && id != optionsTemplateSet && id < minDataSetID {
			return messageResult{}, malformed("set ID %d is reserved", id)
		}
		b = b[n:]
	}
	// Template sets first pass: a malformed template set refuses the message.
	learnt := map[uint64]*template{}
	withdrawn := map[uint64]bool{}
	withdrawAll := false
	for b := body; len(b) > 0; {
		id, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if id == templateSetID {
			err := parseTemplateSet(b[setHeaderLen:n],
				func(tid uint16, t *template) { learnt[templateKey(h.domain, tid)] = t },
				func(tid uint16) {
					if tid == templateSetID {
						// All of the domain's, including those learnt
						// earlier in this message.
						withdrawAll = true
						clear(learnt)
						clear(withdrawn)
						return
					}
					withdrawn[templateKey(h.domain, tid)] = true
					delete(learnt, templateKey(h.domain, tid))
				})
			if err != nil {
				return messageResult{}, err
			}
		}
		b = b[n:]
	}
	if withdrawAll {
		for k := range s.templates {
			if uint32(k>>16) == h.domain {
				s.forget(k)
			}
		}
	}
	for k := range withdrawn {
		s.forget(k)
	}
	res := messageResult{header: h}
	// In template ID order, so which one a bound refuses does not vary.
	for _, k := range slices.Sorted(maps.Keys(learnt)) {
		if err := s.learn(k, learnt[k], now); err != nil {
			res.refuse(reasonTemplateLimit, err)
		}
	}

	s.records = s.records[:0]
	for b := body; len(b) > 0; {
		id, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		set := b[setHeaderLen:n]
		b = b[n:]
		if id < minDataSetID {
			continue
		}
		t := s.lookup(templateKey(h.domain, id), now)
		if t == nil {
			res.refuse(reasonUnknownTemplate, malformed("data set of template %d, which the exporter has not announced in observation domain %d", id, h.domain))
			res.unframed = true
			continue
		}
		for len(set) >= t.minLen && len(set) > 0 {
			s.records = append(s.records, agentRecord{domain: h.domain})
			a := &s.records[len(s.records)-1]
			rest, bad, err := t.nextRecord(set, &a.Record)
			if err != nil {
				s.records = s.records[:len(s.records)-1]
				res.refuse(reasonMalformedRecord, err)
				res.unframed = true
				break // the rest of the set cannot be framed
			}
			res.framed++
			if bad != nil {
				s.records = s.records[:len(s.records)-1]
				res.refuse(reasonMalformedRecord, bad)
			} else {
				a.Observed = h.exportTime
			}
			set = rest
		}
	}
	res.records = s.records
	return res, nil
}

// lookup returns the template, nil when unknown or (UDP) expired.
func (s *session) lookup(k uint64, now time.Time) *template {
	t := s.templates[k]
	if t != nil && s.ttl > 0 && now.Sub(s.announced[k]) > s.ttl {
		s.forget(k)
		return nil
	}
	return t
}
