package flowtable

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
)

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
	tx := newTexts()
	for _, m := range maps {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second time comes from the cache
			if got := tx.podLabels(m); got != string(want) {
				t.Errorf("podLabels(%q) = %s, want %s", m, got, want)
			}
		}
	}
	if got := tx.podLabels(nil); got != "" {
		t.Errorf("podLabels(nil) = %q, want \"\" (labels not collected)", got)
	}
	if got := tx.podLabels(map[string]string{}); got != "{}" {
		t.Errorf("podLabels({}) = %q, want {}", got)
	}
}

// Addresses are netip's text, "" when unset, also once the cache is full and
// starts over.
func TestAddrText(t *testing.T) {
	tx := newTexts()
	if got := tx.addr(netip.Addr{}); got != "" {
		t.Errorf("addr(invalid) = %q, want \"\"", got)
	}
	for i := range maxCachedTexts + 100 {
		for _, a := range []netip.Addr{
			netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
			netip.AddrFrom16([16]byte{0xfd, 0, 14: byte(i >> 8), 15: byte(i)}),
			netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 168, 14: byte(i >> 8), 15: byte(i)}), // 4-in-6
		} {
			if got, want := tx.addr(a), a.String(); got != want {
				t.Fatalf("addr(%v) = %q, want %q", a, got, want)
			}
		}
	}
	if len(tx.addrs) > maxCachedTexts {
		t.Errorf("address cache holds %d entries, bound is %d", len(tx.addrs), maxCachedTexts)
	}
}

func BenchmarkPodLabels(b *testing.B) {
	m := map[string]string{"app": "web", "pod-template-hash": "7d4b9c8f6d", "app.kubernetes.io/name": "frontend"}
	tx := newTexts()
	b.ReportAllocs()
	for range b.N {
		_ = tx.podLabels(m)
	}
}
