package compactcodec

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// kindTypes are the Go types of the Refs' kinds.
var kindTypes = map[catalogue.Kind]reflect.Type{
	catalogue.KindUint8:   reflect.TypeFor[uint8](),
	catalogue.KindEnum:    reflect.TypeFor[uint8](),
	catalogue.KindUint16:  reflect.TypeFor[uint16](),
	catalogue.KindUint32:  reflect.TypeFor[uint32](),
	catalogue.KindUint64:  reflect.TypeFor[uint64](),
	catalogue.KindBool:    reflect.TypeFor[bool](),
	catalogue.KindTime:    reflect.TypeFor[time.Time](),
	catalogue.KindAddr:    reflect.TypeFor[netip.Addr](),
	catalogue.KindString:  reflect.TypeFor[string](),
	catalogue.KindLabels:  reflect.TypeFor[catalogue.Labels](),
	catalogue.KindBytes16: reflect.TypeFor[catalogue.Bytes16](),
}

// fieldValue is f in r, whatever its kind (an aggregation field: r's
// Aggregation, created when r has none).
func fieldValue(r *flowrecord.Record, f *field) reflect.Value {
	return reflect.NewAt(kindTypes[f.ref.Kind], unsafe.Pointer(f.ref.At(r).Uint8())).Elem()
}

// bodyFields are the names of every body field.
func bodyFields() []string {
	var names []string
	for _, f := range slices.Concat(fields, aggregationFields) {
		names = append(names, f.name)
	}
	return names
}

// randomSelection selects each body field with probability 1/4.
func randomSelection(rng *rand.Rand) *Selection {
	var names []string
	for _, n := range bodyFields() {
		if rng.IntN(4) == 0 {
			names = append(names, n)
		}
	}
	return Select(names...)
}

// samePeek fails t unless Peek of lr with sel refuses it exactly as Decode
// does, or reads every field sel selects as Decode does and leaves every
// other one zero.
func samePeek(t testing.TB, lr plog.LogRecord, sel *Selection, what string) {
	t.Helper()
	var full, peeked flowrecord.Record
	errFull, errPeek := Decode(lr, &full, nil), Peek(lr, &peeked, sel)
	if fmt.Sprint(errFull) != fmt.Sprint(errPeek) {
		t.Fatalf("%s: Decode says %v, Peek %v", what, errFull, errPeek)
	}
	if errFull != nil {
		return
	}
	if peeked.Key != full.Key || !peeked.End.Equal(full.End) || !peeked.Observed.Equal(full.Observed) {
		t.Fatalf("%s: Peek read Key, End, Observed %q %v %v, Decode %q %v %v", what, peeked.Key, peeked.End, peeked.Observed, full.Key, full.End, full.Observed)
	}
	check := func(fs []field, keep []bool) {
		for i := range fs {
			got := fieldValue(&peeked, &fs[i])
			if !keep[i] {
				if !got.IsZero() {
					t.Fatalf("%s: Peek set %s, not selected, to %v", what, fs[i].name, got)
				}
				continue
			}
			if want := fieldValue(&full, &fs[i]).Interface(); !reflect.DeepEqual(got.Interface(), want) {
				t.Fatalf("%s: Peek read %s as %#v, Decode as %#v", what, fs[i].name, got, want)
			}
		}
	}
	check(fields, sel.plain)
	switch {
	case !slices.Contains(sel.agg, true) || full.Aggregation == nil:
		if peeked.Aggregation != nil {
			t.Fatalf("%s: Peek made an Aggregation (Decode's: %v, one selected: %v)", what, full.Aggregation, slices.Contains(sel.agg, true))
		}
	default:
		check(aggregationFields, sel.agg)
	}
}

// manyLabels is a record whose label maps are too large for skipLabels'
// comparisons without a map.
func manyLabels() *flowrecord.Record {
	r := flowrecordtest.EveryField()
	r.Source.PodLabels, r.Destination.PodLabels = map[string]string{}, map[string]string{}
	for i := range 2 * smallLabels {
		r.Source.PodLabels[fmt.Sprint("k", i)] = "v"
		r.Destination.PodLabels[fmt.Sprint("k", i)] = ""
	}
	return r
}

// TestPeekAsDecode: over random records with every field set (or a nil
// Aggregation, nil and empty labels) and the test records, Peek reads each
// field it is given as Decode reads it, alone or among others, and leaves
// the others zero.
func TestPeekAsDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 1))
	records := slices.Concat(flowrecordtest.Records(), []*flowrecord.Record{flowrecordtest.EveryField(), flowrecordtest.NodeHalf(), manyLabels()},
		flowrecordtest.RandomRecords(t, rng, 200))
	lr := plog.NewLogRecord()
	for i, r := range records {
		Encode(r, lr)
		samePeek(t, lr, Select(), fmt.Sprintf("record %d, no field", i))
		samePeek(t, lr, Select(bodyFields()...), fmt.Sprintf("record %d, every field", i))
		for range 4 {
			samePeek(t, lr, randomSelection(rng), fmt.Sprintf("record %d, random fields", i))
		}
		for _, name := range bodyFields() {
			samePeek(t, lr, Select(name), fmt.Sprintf("record %d, %s", i, name))
		}
	}
}

// TestPeekMalformed: Peek refuses every malformed record Decode refuses, with
// Decode's error, whichever fields it keeps; every truncation of a body, and
// every byte of one changed, too.
func TestPeekMalformed(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 2))
	selections := []*Selection{Select(), Select(bodyFields()...), randomSelection(rng)}
	for _, tc := range malformedCases() {
		for _, sel := range selections {
			samePeek(t, tc.lr(), sel, tc.name)
		}
	}
	for _, r := range []*flowrecord.Record{flowrecordtest.EveryField(), manyLabels()} {
		lr := plog.NewLogRecord()
		Encode(r, lr)
		body := lr.Body().Bytes().AsRaw()
		for n := range len(body) {
			for _, sel := range selections {
				samePeek(t, compactLogRecord(body[:n]), sel, fmt.Sprintf("body cut at %d of %d bytes", n, len(body)))
			}
		}
		for i := range body {
			for _, b := range []byte{0, 1, 2, 0x7f, 0x80, 0xff, body[i] + 1} {
				changed := slices.Clone(body)
				changed[i] = b
				samePeek(t, compactLogRecord(changed), selections[rng.IntN(len(selections))], fmt.Sprintf("byte %d of %d set to %d", i, len(body), b))
			}
		}
	}
}

func TestSelectUnknownField(t *testing.T) {
	require.PanicsWithValue(t, "compactcodec: "+catalogue.AttrKey+" is not a field of the compact body", func() { Select(catalogue.AttrKey) })
}

// FuzzPeekCompact: for any body under any encoding name, Peek of any fields
// refuses what Decode refuses, with its error, and reads what it reads.
func FuzzPeekCompact(f *testing.F) {
	lr := plog.NewLogRecord()
	for _, r := range []*flowrecord.Record{flowrecordtest.EveryField(), flowrecordtest.NodeHalf(), manyLabels()} {
		Encode(r, lr)
		f.Add(lr.Body().Bytes().AsRaw(), EncodingCompactV1, uint64(1))
	}
	f.Add([]byte{0, 6, 4, 10, 0, 0, 1}, EncodingCompactV1, uint64(2))
	f.Fuzz(func(t *testing.T, body []byte, encoding string, seed uint64) {
		lr := plog.NewLogRecord()
		lr.Attributes().PutStr(AttrRecordEncoding, encoding)
		lr.Body().SetEmptyBytes().FromRaw(body)
		samePeek(t, lr, randomSelection(rand.New(rand.NewPCG(seed, 0))), "fuzzed body")
	})
}
