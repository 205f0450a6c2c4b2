package antreawire

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"testing"
	"time"
)

// AppendJSONString quotes as encoding/json does, plain or not.
func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "web", "a.b/c-d_e", `q"uo\te`, "<a&b>", "tab\t\x00\x1f", "é\u2028", "\xff\xfe"} {
		want, _ := json.Marshal(s)
		if got := AppendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendJSONString(%q) = %s, want x%s", s, got, want)
		}
	}
}

// UnixSeconds clamps to the 32-bit range; the zero time is 0.
func TestUnixSeconds(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want uint32
	}{
		{time.Time{}, 0},
		{time.Unix(0, 0), 0},
		{time.Unix(-5, 0), 0},
		{time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{time.Unix(1796205600, 999999999), 1796205600},
		{time.Unix(math.MaxUint32, 0), math.MaxUint32},
		{time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxUint32},
	} {
		if got := UnixSeconds(c.t); got != c.want {
			t.Errorf("UnixSeconds(%v) = %d, want %d", c.t, got, c.want)
		}
	}
}

// The label JSON is byte for byte what encoding/json writes for the map
// (Antrea's encoding), including strings that need escaping.
func TestPodLabelsMatchEncodingJSON(t *testing.T) {
	maps := []map[string]string{
		{"app": "web"},
		{"app": "web", "pod-template-hash": "7d4b9c8f6d", "app.kubernetes.io/name": "frontend", "tier": ""},
		{"b": "2", "a": "1", "B": "3", "a.b/c": "4", "a-b": "5"},
		{"quote": `say "hi"`, "back\\slash": "x", "html": "<a href='x'>&</a>"},
		{"ctl": "tab\there\nnl\r\x00\x1f\b\f", "uni": "päd\u2028\u2029", "bad": "\xff\xfeok"},
		{"": ""},
	}
	for i := range 50 {
		m := map[string]string{}
		for j := range i % 9 {
			m[fmt.Sprintf("k%02d-%d", (j*7)%13, i)] = fmt.Sprintf("v%d", j)
		}
		maps = append(maps, m)
	}
	var tx Texts
	for _, m := range maps {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second time comes from the cache
			if got := tx.Labels(m); got != string(want) {
				t.Errorf("Labels(%q) = %s, want %s", m, got, want)
			}
		}
	}
	// A Decoder refills the same map record after record: each new content
	// is rendered anew, whether keys or only values change.
	reused := map[string]string{}
	for _, set := range []map[string]string{
		{"app": "web", "tier": "front"},
		{"app": "web", "tier": "back"},
		{"app": "web", "zone": "back"},
		{"app": "web"},
		{"app": "web", "tier": "back", "x": ""},
		{"app": "web", "tier": "back", "x": ""},
	} {
		clear(reused)
		for k, v := range set {
			reused[k] = v
		}
		want, _ := json.Marshal(set)
		if got := tx.Labels(reused); got != string(want) {
			t.Errorf("Labels(%q) after refilling the map = %s, want %s", set, got, want)
		}
	}
	if got := tx.Labels(nil); got != "" {
		t.Errorf("Labels(nil) = %q, want \"\" (labels not collected)", got)
	}
	if got := tx.Labels(map[string]string{}); got != "{}" {
		t.Errorf("Labels({}) = %q, want {}", got)
	}
}

// Addresses are netip's text, "" when unset, also once the cache is full and
// starts over.
func TestAddrText(t *testing.T) {
	var tx Texts
	if got := tx.Addr(netip.Addr{}); got != "" {
		t.Errorf("Addr(invalid) = %q, want \"\"", got)
	}
	for i := range maxCachedTexts + 100 {
		for _, a := range []netip.Addr{
			netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
			netip.AddrFrom16([16]byte{0xfd, 0, 14: byte(i >> 8), 15: byte(i)}),
			netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 168, 14: byte(i >> 8), 15: byte(i)}), // 4-in-6
		} {
			if got, want := tx.Addr(a), a.String(); got != want {
				t.Fatalf("Addr(%v) = %q, want %q", a, got, want)
			}
		}
	}
	if len(tx.addrs) > maxCachedTexts {
		t.Errorf("address cache holds %d entries, bound is %d", len(tx.addrs), maxCachedTexts)
	}
}

func BenchmarkPodLabels(b *testing.B) {
	m := map[string]string{"app": "web", "pod-template-hash": "7d4b9c8f6d", "app.kubernetes.io/name": "frontend"}
	var tx Texts
	b.ReportAllocs()
	for range b.N {
		_ = tx.Labels(m)
	}
}
