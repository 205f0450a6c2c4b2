// Package antreawire holds how both exporters write values the way Antrea
// does on its wires (IPFIX, its JSON records, its ClickHouse table): Pod
// labels as encoding/json's rendering of the map, JSON strings with
// encoding/json's escaping, times as 32-bit Unix seconds, addresses as text.
package antreawire

import (
	"encoding/json"
	"math"
	"net/netip"
	"slices"
	"time"
	"unicode/utf8"
)

// UnixSeconds is t as an IPFIX dateTimeSeconds or ClickHouse DateTime value:
// Unix seconds clamped to [0, 2^32-1], 0 for the zero time.
func UnixSeconds(t time.Time) uint32 {
	if t.IsZero() {
		return 0
	}
	return uint32(max(0, min(t.Unix(), math.MaxUint32)))
}

// AppendJSONString appends s quoted exactly as encoding/json quotes it
// (including its HTML escaping of <, > and &). Plain ASCII, which Kubernetes
// names and labels are, is written directly without allocating; anything else
// goes through encoding/json.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// maxCachedTexts bounds each cache of a Texts; a full cache is emptied and
// refilled, so memory stays bounded when addresses or label sets churn.
const maxCachedTexts = 1 << 14

// Texts turns addresses and Pod label sets into the strings Antrea writes. A
// Pod's address and labels repeat in every flow of that Pod, so each distinct
// value is formatted once and its string reused: a record then costs no
// allocation for them. The zero Texts is ready to use; a Texts is not safe for
// concurrent use.
type Texts struct {
	addrs  map[netip.Addr]string
	labels map[string]string // label JSON, by itself
	keys   []string          // scratch: label keys being sorted
	values []string          // scratch: their values
	json   []byte            // scratch: label JSON being written

	// The last value of each, checked before the caches: one IE or column
	// often carries the same value record after record.
	lastAddr       netip.Addr
	lastAddrText   string
	lastLabelsText string
	// lastKeys (sorted) and lastValues are the label set lastLabelsText
	// renders: a set equal to it is not rendered again. They keep only that
	// set's strings alive.
	lastKeys, lastValues []string
}

// Addr is a in netip's textual form, "" when unset. It is not unmapped: a
// 4-in-6 address reads ::ffff:a.b.c.d.
func (t *Texts) Addr(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	if a == t.lastAddr {
		return t.lastAddrText
	}
	s, ok := t.addrs[a]
	if !ok {
		s = t.cacheAddr(a)
	}
	t.lastAddr, t.lastAddrText = a, s
	return s
}

func (t *Texts) cacheAddr(a netip.Addr) string {
	if t.addrs == nil {
		t.addrs = make(map[netip.Addr]string)
	} else if len(t.addrs) >= maxCachedTexts {
		clear(t.addrs)
	}
	s := a.String()
	t.addrs[a] = s
	return s
}

// Labels is Antrea's label encoding: a JSON object with sorted keys, as
// encoding/json writes a map[string]string ("{}" for a Pod without labels),
// "" when labels were not collected (a nil map).
func (t *Texts) Labels(m map[string]string) string {
	if m == nil {
		return ""
	}
	if len(m) == 0 {
		return "{}"
	}
	if t.sameLabels(m) {
		return t.lastLabelsText
	}
	t.json = t.appendLabels(t.json[:0], m)
	s, ok := t.labels[string(t.json)] // the lookup does not allocate
	if !ok {
		s = t.cacheLabels()
	}
	t.lastLabelsText = s
	// The set just rendered becomes the last one; the previous one's slices
	// are the next scratch.
	t.lastKeys, t.keys = t.keys, t.lastKeys
	t.lastValues, t.values = t.values, t.lastValues
	clear(t.keys)
	clear(t.values)
	return s
}

// sameLabels reports whether m holds the label set last rendered: as many
// entries, each of its keys with its value (the keys being distinct).
func (t *Texts) sameLabels(m map[string]string) bool {
	if len(m) != len(t.lastKeys) {
		return false
	}
	for i, k := range t.lastKeys {
		if v, ok := m[k]; !ok || v != t.lastValues[i] {
			return false
		}
	}
	return true
}

func (t *Texts) cacheLabels() string {
	if t.labels == nil {
		t.labels = make(map[string]string)
	} else if len(t.labels) >= maxCachedTexts {
		clear(t.labels)
	}
	s := string(t.json)
	t.labels[s] = s
	return s
}

// appendLabels appends m's JSON, leaving its keys (sorted) and values in
// t.keys and t.values.
func (t *Texts) appendLabels(b []byte, m map[string]string) []byte {
	t.keys, t.values = t.keys[:0], t.values[:0]
	for k := range m {
		t.keys = append(t.keys, k)
	}
	slices.Sort(t.keys) // byte order, as encoding/json sorts map keys
	b = append(b, '{')
	for i, k := range t.keys {
		if i > 0 {
			b = append(b, ',')
		}
		v := m[k]
		t.values = append(t.values, v)
		b = AppendJSONString(b, k)
		b = append(b, ':')
		b = AppendJSONString(b, v)
	}
	return append(b, '}')
}
