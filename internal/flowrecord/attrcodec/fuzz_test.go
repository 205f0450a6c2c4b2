package attrcodec

import (
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// FuzzRoundTrip: Decode(Encode(r)) == r for any record.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19"))
	f.Add(make([]byte, 600))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := flowrecordtest.FromBytes(data)
		lr := plog.NewLogRecord()
		Encode(in, lr)
		var out flowrecord.Record
		if err := Decode(lr, &out); err != nil {
			t.Fatalf("decode of an encoded record failed: %v", err)
		}
		if !reflect.DeepEqual(in, &out) {
			t.Fatalf("round trip changed the record:\n in=%+v\nout=%+v", in, &out)
		}
	})
}

// FuzzDecode: decoding arbitrary attribute maps never panics; it succeeds or
// returns an error, the same through pdata's API as through its internals,
// with Decode as with a Decoder.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{}, int64(0), "x")
	f.Add([]byte{1, 2, 3, 4, 5}, int64(-1), "10.0.0.1")
	f.Add([]byte{0, 0, 0, 0}, int64(70000), "not-an-ip")
	f.Fuzz(func(t *testing.T, picks []byte, i int64, s string) {
		decodesAsAPI(t, mutated(picks, i, s))
	})
}

// mutated is a full record with the attributes picks name removed or
// replaced by values of every type made of i and s.
func mutated(picks []byte, i int64, s string) plog.LogRecord {
	lr := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), lr)
	m := lr.Attributes()
	for _, p := range picks {
		name := attributes[int(p)%len(attributes)].Name
		switch p % 7 {
		case 0:
			m.Remove(name)
		case 1:
			m.PutStr(name, s)
		case 2:
			m.PutInt(name, i)
		case 3:
			m.PutBool(name, i%2 == 0)
		case 4:
			m.PutDouble(name, float64(i))
		case 5:
			sub := m.PutEmptyMap(name)
			sub.PutStr(s, s)
			sub.PutInt(s+"i", i)
		case 6:
			m.PutEmptyBytes(name).FromRaw([]byte(s))
		}
	}
	return lr
}
