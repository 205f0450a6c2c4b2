package flowtable

import (
	"encoding/json"
	"net/netip"
	"slices"
)

// maxCachedTexts bounds each cache of a texts; a full cache is emptied and
// refilled, so memory stays bounded when addresses or label sets churn.
const maxCachedTexts = 1 << 14

// texts turns addresses and Pod label sets into the strings the table holds.
// A Pod's address and labels repeat in every flow of that Pod, so each
// distinct value is formatted once and its string reused: a row then costs no
// allocation for them. A texts belongs to one Block and is not safe for
// concurrent use.
type texts struct {
	addrs  map[netip.Addr]string
	labels map[string]string // label JSON, by itself
	keys   []string          // scratch: label keys being sorted
	json   []byte            // scratch: label JSON being written
}

func newTexts() texts {
	return texts{addrs: map[netip.Addr]string{}, labels: map[string]string{}}
}

// addr is a in Antrea's textual form (netip's), "" when unset.
func (t *texts) addr(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	if s, ok := t.addrs[a]; ok {
		return s
	}
	if len(t.addrs) >= maxCachedTexts {
		clear(t.addrs)
	}
	s := a.String()
	t.addrs[a] = s
	return s
}

// podLabels is Antrea's label encoding: a JSON object with sorted keys, as
// encoding/json writes a map[string]string ({} for a Pod without labels), ""
// when labels were not collected.
func (t *texts) podLabels(m map[string]string) string {
	if m == nil {
		return ""
	}
	if len(m) == 0 {
		return "{}"
	}
	t.json = t.appendLabels(t.json[:0], m)
	if s, ok := t.labels[string(t.json)]; ok { // the lookup does not allocate
		return s
	}
	if len(t.labels) >= maxCachedTexts {
		clear(t.labels)
	}
	s := string(t.json)
	t.labels[s] = s
	return s
}

func (t *texts) appendLabels(b []byte, m map[string]string) []byte {
	t.keys = t.keys[:0]
	for k := range m {
		t.keys = append(t.keys, k)
	}
	slices.Sort(t.keys) // byte order, as encoding/json sorts map keys
	b = append(b, '{')
	for i, k := range t.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	clear(t.keys) // do not keep the record's strings alive
	return append(b, '}')
}

// appendJSONString appends s as a JSON string exactly as encoding/json writes
// it. Kubernetes label keys and values are plain ASCII that needs no
// escaping, which is written directly; anything else (quotes, control
// characters, HTML-escaped <>&, non-ASCII) goes through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
