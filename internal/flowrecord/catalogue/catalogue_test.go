package catalogue

import (
	"testing"

	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"

	"github.com/vmware/go-ipfix/pkg/entities"
	"github.com/vmware/go-ipfix/pkg/registry"
)

// Every IE of the catalogue is the one of that name in go-ipfix's registry
// (Antrea's and IANA's IEs): same enterprise, ID and type. IE names are unique.
func TestCatalogueIEsMatchTheRegistry(t *testing.T) {
	registry.LoadRegistry()
	seen := map[string]bool{}
	n := 0
	for _, f := range catalogue {
		for _, ie := range f.IPFIX {
			n++
			if seen[ie.Name] {
				t.Errorf("IE %s is in the catalogue twice", ie.Name)
			}
			seen[ie.Name] = true
			reg, err := registry.GetInfoElement(ie.Name, ie.Enterprise)
			if err != nil {
				t.Errorf("IE %s (enterprise %d): %v", ie.Name, ie.Enterprise, err)
				continue
			}
			if reg.ElementId != ie.ID || reg.DataType != entities.IEDataType(ie.Type) {
				t.Errorf("IE %s: catalogue says ID %d type %s, registry ID %d type %d", ie.Name, ie.ID, ie.Type, reg.ElementId, reg.DataType)
			}
			if _, written := IPFIXElements()[ie.Name]; written == ie.Inbound {
				t.Errorf("IE %s: inbound %v, in IPFIXElements %v", ie.Name, ie.Inbound, written)
			}
			if ie.Value.Kind == KindNone {
				t.Errorf("IE %s carries no value", ie.Name)
			}
		}
	}
	if len(IPFIXElements()) != n-2 {
		t.Errorf("IPFIXElements has %d IEs, the catalogue %d and 2 inbound", len(IPFIXElements()), n)
	}
}

// The columns are unique, Antrea's positions are 1 to 51 without a gap, and
// every column carries a value.
func TestCatalogueColumns(t *testing.T) {
	cols := ClickHouseColumns()
	seen := map[string]bool{}
	antrea := 0
	for i, c := range cols {
		if seen[c.Name] {
			t.Errorf("column %s is in the catalogue twice", c.Name)
		}
		seen[c.Name] = true
		if c.Antrea != 0 {
			antrea++
			if c.Antrea != i+1 {
				t.Errorf("column %s: Antrea position %d, at %d", c.Name, c.Antrea, i+1)
			}
		}
		if c.Value.Kind == KindNone || c.Doc == "" || c.Type.String() == "" {
			t.Errorf("column %s: value %s, doc %q, type %q", c.Name, c.Value.Kind, c.Doc, c.Type)
		}
	}
	if antrea != 51 {
		t.Errorf("%d Antrea columns, want 51", antrea)
	}
}

// Each Value reads the Record field it names: the full record's values are
// those its attributes carry, and a Record without Aggregation reads zero for
// the aggregation fields and is left without one.
func TestCatalogueValues(t *testing.T) {
	r := flowrecordtest.EveryField()
	if got := findField(t, "flow.reverse.bytes.total").Value.Uint64(r); got != r.ReverseStats.OctetTotal {
		t.Errorf("reverse octets %d, want %d", got, r.ReverseStats.OctetTotal)
	}
	if got := findField(t, "destination.k8s.pod.labels").Value.Labels(r); len(got) != 0 || got == nil {
		t.Errorf("destination labels %v, want empty", got)
	}
	if v := findField(t, "flow.direction").IPFIX[0].Value; v.Uint8(r) != 1 {
		t.Errorf("flowDirection %d, want Antrea's egress (1)", v.Uint8(r))
	}
	if v := findField(t, AttrCorrelationState).Value; v.Name(r) != "paired" {
		t.Errorf("correlation %q", v.Name(r))
	}
	r.Aggregation = nil
	for _, f := range catalogue {
		if !f.Aggregation {
			continue
		}
		switch f.Value.Kind {
		case KindUint64:
			if f.Value.Uint64(r) != 0 {
				t.Errorf("%s reads non-zero without Aggregation", f.Attribute)
			}
		case KindTime:
			if !f.Value.Time(r).IsZero() {
				t.Errorf("%s reads non-zero without Aggregation", f.Attribute)
			}
		default:
			t.Errorf("%s: aggregation field of kind %s", f.Attribute, f.Value.Kind)
		}
	}
	if r.Aggregation != nil {
		t.Error("reading an aggregation field created Aggregation")
	}
}

func findField(t *testing.T, attr string) Field {
	t.Helper()
	for _, f := range Fields() {
		if f.Attribute == attr {
			return f
		}
	}
	t.Fatalf("no field %s", attr)
	return Field{}
}

// Every field has a Name, unique (wires outside the catalogue key their
// mappings by it), and every field not derived a WireRef.
func TestFieldNames(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range catalogue {
		n := f.Name()
		if n == "" || seen[n] {
			t.Errorf("field %q (%s): no name, or a name twice", n, f.Doc)
		}
		seen[n] = true
		if !f.Derived && f.WireRef().Kind == KindNone {
			t.Errorf("%s: no WireRef", n)
		}
	}
	if !seen["(end)"] || !seen["(cluster_uid)"] {
		t.Error("the fields outside the attributes are not named (end), (cluster_uid)")
	}
}
