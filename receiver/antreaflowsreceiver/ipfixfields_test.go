package antreaflowsreceiver

import (
	"testing"

	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// Every IE the receiver reads is an IE of the field catalogue (same
// enterprise and ID), so the receiver's table cannot name an IE the
// exporters and the documents do not know, but for the policy UIDs: Antrea's
// agents send them as strings (ingress/egressNetworkPolicyUID, 114 and 117),
// the catalogue lists the 16-byte UUID IEs the exporters write (164, 165).
// (The table is still written by hand, into the agent record: issue 44.)
func TestReadIEsAreTheCatalogues(t *testing.T) {
	known := map[ieID]string{
		{entAntrea, 114}: "ingressNetworkPolicyUID",
		{entAntrea, 117}: "egressNetworkPolicyUID",
	}
	for name, ie := range catalogue.IPFIXElements() {
		known[ieID{ie.Enterprise, ie.ID}] = name
	}
	for id := range setters {
		if _, ok := known[id]; !ok {
			t.Errorf("the receiver reads IE %d/%d, which the catalogue does not list", id.enterprise, id.id)
		}
	}
	if len(setters) < 40 {
		t.Errorf("the receiver reads %d IEs", len(setters))
	}
}
