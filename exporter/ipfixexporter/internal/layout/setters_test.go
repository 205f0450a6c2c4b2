package layout

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/vmware/go-ipfix/pkg/entities"
	"github.com/vmware/go-ipfix/pkg/registry"

	"github.com/flowtel/flowtel/internal/flowrecord"
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

// setterOf is the setter of an IE of the catalogue in an IPv4 template.
func setterOf(t *testing.T, name string) setter {
	t.Helper()
	set, err := newSetter(catalogue[name], false)
	if err != nil {
		t.Fatal(err)
	}
	return set
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
