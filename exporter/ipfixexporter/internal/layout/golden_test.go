package layout

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmware/go-ipfix/pkg/entities"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
	"github.com/flowtel/flowtel/internal/flowrecord/gencheck"
)

// goldenOptions are every layout the exporter can be configured with.
func goldenOptions() []Options {
	out := []Options{{Kind: Agent}}
	for _, k := range []Kind{Aggregate, Proxy} {
		for _, names := range []bool{false, true} {
			for _, uids := range []bool{false, true} {
				out = append(out, Options{Kind: k, IncludeK8sNames: names, IncludeK8sUIDs: uids})
			}
		}
	}
	return out
}

// TestWireGolden pins the templates and the encoding (IPFIX data record and
// JSON object) of the test records in every layout, so that how the layouts
// are built can change while what goes on the wire cannot. Run with
// FLOWTEL_UPDATE_GOLDEN=1 to rewrite testdata/wire.golden after an intended
// change of the wire format.
func TestWireGolden(t *testing.T) {
	var b strings.Builder
	now := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	for _, o := range goldenOptions() {
		v4, v6, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, tmpl := range []*Template{v4, v6} {
			fmt.Fprintf(&b, "== %+v template %d ipv6=%t min %d set %d\n", o, tmpl.ID, tmpl.IPv6, tmpl.MinRecordLen(), tmpl.TemplateSetLen())
			for _, ie := range tmpl.Elements() {
				fmt.Fprintf(&b, "  %s %d/%d %d len %d\n", ie.Name, ie.EnterpriseId, ie.ElementId, ie.DataType, ie.Len)
			}
			fmt.Fprintf(&b, "  set %x\n", tmpl.AppendTemplateSet(nil))
			for i, r := range flowrecordtest.Records() {
				if r.IsIPv6() != tmpl.IPv6 {
					continue
				}
				if err := fill(tmpl, r, "cluster-"+fmt.Sprint(i)); err != nil {
					fmt.Fprintf(&b, "  record %d: %v\n", i, err)
					if buf, werr := tmpl.AppendRecord([]byte{1}, r); fmt.Sprint(werr) != err.Error() || !bytes.Equal(buf, []byte{1}) {
						t.Errorf("%+v template %d record %d: AppendRecord gave %x, %v; want the buffer unchanged and %v", o, tmpl.ID, i, buf, werr, err)
					}
					continue
				}
				rec, err := tmpl.AppendRecord(nil, r)
				if err != nil {
					t.Fatal(err)
				}
				if want := goIPFIXRecord(t, tmpl); !bytes.Equal(rec, want) {
					t.Errorf("%+v template %d record %d: the write plan wrote\n%x\ngo-ipfix writes\n%x", o, tmpl.ID, i, rec, want)
				}
				fmt.Fprintf(&b, "  record %d len %d\n    %s\n    %s", i, len(rec), hex.EncodeToString(rec), tmpl.AppendJSON(nil, now))
			}
		}
	}
	gencheck.File(t, "testdata/wire.golden", b.String(), "run FLOWTEL_UPDATE_GOLDEN=1 go test after an intended change of the wire format")
}

// goIPFIXRecord is the filled template's data record as go-ipfix encodes it.
func goIPFIXRecord(t *testing.T, tmpl *Template) []byte {
	t.Helper()
	rec := entities.NewDataRecordFromElements(tmpl.ID, tmpl.elements)
	out, err := rec.AppendToBuffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != rec.GetRecordLength() {
		t.Fatalf("go-ipfix wrote %d bytes of a %d-byte record", len(out), rec.GetRecordLength())
	}
	return out
}

func fill(tmpl *Template, r *flowrecord.Record, clusterID string) error {
	r.ClusterUID = clusterID
	return tmpl.Fill(r)
}
