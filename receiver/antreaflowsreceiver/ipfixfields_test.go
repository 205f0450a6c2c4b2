package antreaflowsreceiver

import (
	"net/netip"
	"testing"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// The receiver's IE table is the catalogue's: every IE it reads is a
// catalogue IE, and it reads every catalogue IE outside the Aggregation
// that carries its field's Ref, but for the 16-byte UUIDs (octetArray) and
// the Pod labels; the agents' string policy UIDs are the catalogue's
// inbound IEs.
func TestReadIEsAreTheCatalogues(t *testing.T) {
	want := map[ieID]string{}
	for _, f := range catalogue.Fields() {
		for _, ie := range f.IPFIX {
			if !readIE(ie) {
				continue
			}
			want[ieID{ie.Enterprise, ie.ID}] = ie.Name
		}
	}
	for id, name := range want {
		if setters[id] == nil {
			t.Errorf("the receiver does not read %s (%d/%d)", name, id.enterprise, id.id)
		}
	}
	for id := range setters {
		if _, ok := want[id]; !ok {
			t.Errorf("the receiver reads IE %d/%d, which is not such a catalogue IE", id.enterprise, id.id)
		}
	}
	for _, id := range []ieID{{entAntrea, 164}, {entAntrea, 165}} {
		if setters[id] != nil {
			t.Errorf("the receiver reads the policy UUID %d", id.id)
		}
	}
	if len(setters) < 50 {
		t.Errorf("the receiver reads %d IEs", len(setters))
	}
}

// The agents' string policy UIDs land in the policies; the deprecated
// destinationClusterIPv4 is read only when destinationServiceIPv4 is unset
// or zero, whichever comes first.
func TestSettersWriteTheirFields(t *testing.T) {
	var r flowrecord.Record
	mustSet(t, &r, entAntrea, 114, []byte("uid-anp"))
	mustSet(t, &r, entAntrea, 117, []byte("uid-acnp"))
	if r.IngressPolicy.UID != "uid-anp" || r.EgressPolicy.UID != "uid-acnp" {
		t.Errorf("policy UIDs %q, %q", r.IngressPolicy.UID, r.EgressPolicy.UID)
	}
	svc, cluster := []byte{10, 96, 0, 10}, []byte{10, 96, 0, 99}
	for name, seq := range map[string][][]byte{
		"service, cluster": {svc, cluster}, "cluster, service": {cluster, svc}, "zero service, cluster": {{0, 0, 0, 0}, cluster},
	} {
		var r flowrecord.Record
		ids := map[string][2]uint16{"service, cluster": {168, 106}, "cluster, service": {106, 168}, "zero service, cluster": {168, 106}}[name]
		for i, v := range seq {
			mustSet(t, &r, entAntrea, ids[i], v)
		}
		want := netip.AddrFrom4([4]byte(svc))
		if name == "zero service, cluster" {
			want = netip.AddrFrom4([4]byte(cluster))
		}
		if r.Service.Address != want {
			t.Errorf("%s: service address %v, want %v", name, r.Service.Address, want)
		}
	}
	if err := setterFor(entAntrea, 106)(&flowrecord.Record{Service: flowrecord.Service{Address: netip.MustParseAddr("10.96.0.10")}}, []byte{1, 2}); err == nil {
		t.Error("a cluster IP of 2 bytes was taken")
	}
}

// readIE says whether the receiver is to read the catalogue IE: one that
// carries its field's Ref outside the Aggregation (agents send none), but
// for the 16-byte UUIDs (octetArray) and the Pod labels (a JSON string).
func readIE(ie catalogue.IE) bool {
	return ie.Ref.Kind != catalogue.KindNone && !ie.Ref.Aggregation && ie.Type != catalogue.OctetArray && ie.Ref.Kind != catalogue.KindLabels
}

func mustSet(t *testing.T, r *flowrecord.Record, ent uint32, id uint16, v []byte) {
	t.Helper()
	set := setterFor(ent, id)
	if set == nil {
		t.Fatalf("IE %d/%d not read", ent, id)
	}
	if err := set(r, v); err != nil {
		t.Fatalf("IE %d/%d: %v", ent, id, err)
	}
}
