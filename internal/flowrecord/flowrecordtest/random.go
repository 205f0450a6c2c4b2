package flowrecordtest

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// enumSizes are the enumerations of Record and how many values each has; a
// new enumeration must be added here (Random fails until it is).
var enumSizes = map[reflect.Type]int{
	reflect.TypeFor[flowrecord.EndpointKind]():     len(flowrecord.EndpointKind(0).Names()),
	reflect.TypeFor[flowrecord.EndReason]():        len(flowrecord.EndReason(0).Names()),
	reflect.TypeFor[flowrecord.FlowType]():         len(flowrecord.FlowType(0).Names()),
	reflect.TypeFor[flowrecord.PolicyType]():       len(flowrecord.PolicyType(0).Names()),
	reflect.TypeFor[flowrecord.RuleAction]():       len(flowrecord.RuleAction(0).Names()),
	reflect.TypeFor[flowrecord.Side]():             len(flowrecord.Side(0).Names()),
	reflect.TypeFor[flowrecord.Direction]():        len(flowrecord.Direction(0).Names()),
	reflect.TypeFor[flowrecord.CorrelationState](): len(flowrecord.CorrelationState(0).Names()),
}

// Random sets every field of a Record, found by reflection, to a random
// non-zero value (ClusterUID aside: it travels on the resource). A field added
// to Record is filled too, so a round trip that loses it fails.
func Random(t testing.TB, rng *rand.Rand) *flowrecord.Record {
	var r flowrecord.Record
	fillRandom(t, rng, "Record", reflect.ValueOf(&r).Elem())
	return &r
}

// RandomRecords are n Random records, varied where a round trip could go
// wrong: every third without an Aggregation, every third with nil source
// labels and empty destination ones.
func RandomRecords(t testing.TB, rng *rand.Rand, n int) []*flowrecord.Record {
	records := make([]*flowrecord.Record, n)
	for i := range records {
		r := Random(t, rng)
		switch i % 3 {
		case 1:
			r.Aggregation = nil
		case 2:
			r.Source.PodLabels, r.Destination.PodLabels = nil, map[string]string{}
		}
		records[i] = r
	}
	return records
}

func fillRandom(t testing.TB, rng *rand.Rand, path string, v reflect.Value) {
	nonZero := func(n uint64) uint64 { return 1 + rng.Uint64N(n) }
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Unix(0, int64(nonZero(math.MaxInt64-1))).UTC()))
		return
	case reflect.TypeFor[netip.Addr]():
		v.Set(reflect.ValueOf(RandomAddr(rng)))
		return
	}
	if n, ok := enumSizes[v.Type()]; ok {
		v.SetUint(nonZero(uint64(n - 1)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := path + "." + v.Type().Field(i).Name
			if f != "Record.ClusterUID" {
				fillRandom(t, rng, f, v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillRandom(t, rng, path, v.Elem())
	case reflect.Map:
		m := map[string]string{}
		for range 1 + rng.IntN(4) {
			m[randomString(rng)] = randomString(rng)
		}
		v.Set(reflect.ValueOf(m))
	case reflect.String:
		v.SetString(randomString(rng))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Type().PkgPath() != "" {
			t.Fatalf("%s: %s is an enumeration Random does not know: add it to enumSizes", path, v.Type())
		}
		v.SetUint(nonZero(math.MaxUint64 >> (64 - v.Type().Bits())))
	case reflect.Array:
		for i := range v.Len() {
			v.Index(i).SetUint(nonZero(255))
		}
	default:
		t.Fatalf("%s: Random cannot fill a %s", path, v.Type())
	}
}

func randomString(rng *rand.Rand) string {
	b := make([]byte, 1+rng.IntN(40))
	for i := range b {
		b[i] = byte(rng.Uint32()) // any bytes: the encoding carries them as they are
	}
	return string(b)
}

// RandomAddr is a random address: IPv4, IPv6 with a zone, IPv4-mapped IPv6 or IPv6.
func RandomAddr(rng *rand.Rand) netip.Addr {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	switch rng.IntN(4) {
	case 0:
		return netip.AddrFrom4([4]byte(b[:4]))
	case 1:
		return netip.AddrFrom16(b).WithZone("eth0")
	case 2:
		return netip.AddrFrom16(netip.AddrFrom4([4]byte(b[:4])).As16()) // IPv4-mapped stays IPv4-mapped
	default:
		return netip.AddrFrom16(b)
	}
}
