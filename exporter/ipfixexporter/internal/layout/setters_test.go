package layout

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/vmware/go-ipfix/pkg/entities"
	"github.com/vmware/go-ipfix/pkg/registry"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

func stringIE(t *testing.T, name string) entities.InfoElementWithValue {
	t.Helper()
	ie, err := registry.GetInfoElement(name, registry.AntreaEnterpriseID)
	if err != nil {
		t.Fatal(err)
	}
	v, err := entities.DecodeAndCreateInfoElementWithValue(ie, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// setterOf sets the go-ipfix element of an IE of the catalogue in an IPv4 template.
func setterOf(t *testing.T, name string) func(*flowrecord.Record, entities.InfoElementWithValue) error {
	t.Helper()
	o, err := newOp(catalogueIEs[name], false)
	if err != nil {
		t.Fatal(err)
	}
	return o.set
}

// TestLabelsAsEncodingJSON: Pod labels are written exactly as encoding/json
// renders the map (Antrea marshals it), including escaping, and a repeated or
// changed label set is re-rendered correctly by the reusing setter.
func TestLabelsAsEncodingJSON(t *testing.T) {
	ie := stringIE(t, "sourcePodLabels")
	set := setterOf(t, "sourcePodLabels")
	cases := []map[string]string{
		{"app": "web", "tier": "front"},
		{"app": "web", "tier": "front"},
		{"z": "1", "a": "2", "m": "x<y>&\"q\"\\\n\t\u2028é"},
		{"app.kubernetes.io/name": "api"},
		{"bad": "\xff"},
	}
	for _, m := range cases {
		r := &flowrecord.Record{Source: flowrecord.Endpoint{PodLabels: m}}
		if err := set(r, ie); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(m)
		if got := ie.GetStringValue(); got != string(want) {
			t.Errorf("labels %v: got %s, want %s", m, got, want)
		}
	}
	for m, want := range map[*map[string]string]string{nil: "", {}: "{}"} {
		r := &flowrecord.Record{}
		if m != nil {
			r.Source.PodLabels = *m
		}
		_ = set(r, ie)
		if got := ie.GetStringValue(); got != want {
			t.Errorf("labels %v: got %q, want %q", m, got, want)
		}
	}
}

// TestEgressIPText: the Egress IP is text, "" for none, and follows changes.
func TestEgressIPText(t *testing.T) {
	ie := stringIE(t, "egressIP")
	set := setterOf(t, "egressIP")
	for _, s := range []string{"192.0.2.10", "192.0.2.10", "", "2001:db8::1", "::ffff:192.0.2.11"} {
		r := &flowrecord.Record{}
		want := s
		if s != "" {
			r.Egress.Address = netip.MustParseAddr(s)
			want = r.Egress.Address.Unmap().String()
		}
		_ = set(r, ie)
		if got := ie.GetStringValue(); got != want {
			t.Errorf("egress %q: got %q, want %q", s, got, want)
		}
	}
}

// TestStringLengths: strings are written as go-ipfix writes them on both
// sides of the one-byte length limit, and one over 65535 bytes fails the
// record naming the IE, leaving the buffer as it was.
func TestStringLengths(t *testing.T) {
	o, err := newOp(catalogueIEs["sourcePodName"], false)
	if err != nil {
		t.Fatal(err)
	}
	ie := stringIE(t, "sourcePodName")
	for _, n := range []int{0, 1, 254, 255, 256, maxString} {
		r := &flowrecord.Record{Source: flowrecord.Endpoint{PodName: strings.Repeat("p", n)}}
		got, err := appendOps([]byte{7}, []op{o}, r)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		ie.SetStringValue(r.Source.PodName)
		want, err := entities.NewDataRecordFromElements(256, []entities.InfoElementWithValue{ie}).AppendToBuffer([]byte{7})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%d bytes: wrote %x..., go-ipfix writes %x...", n, got[:min(len(got), 4)], want[:min(len(want), 4)])
		}
	}
	tmpl, _, err := New(Options{Kind: Aggregate, IncludeK8sNames: true})
	if err != nil {
		t.Fatal(err)
	}
	r := flowrecordtest.Full(false)
	r.Source.PodName = strings.Repeat("p", maxString+1)
	buf, err := tmpl.AppendRecord([]byte{7}, r)
	if want := "IE sourcePodName: value of 65536 bytes exceeds the IPFIX variable-length limit of 65535 bytes"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	if !bytes.Equal(buf, []byte{7}) {
		t.Errorf("buffer %x after a failed record, want 07", buf[:min(len(buf), 8)])
	}
}
