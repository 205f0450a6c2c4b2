package compactcodec

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// compactBody is a body written field by field, to build malformed ones.
type compactBody struct{ writer }

// untilSourceLabels writes a valid body up to the source's labels.
func (b *compactBody) untilSourceLabels() *compactBody {
	b.time(time.Unix(1, 0))
	b.u8(6)
	b.addr(netip.MustParseAddr("10.0.0.1"))
	b.uvarint(80)
	b.u8(uint8(flowrecord.EndpointPod))
	b.str("ns")
	b.str("pod")
	b.str("uid")
	return b
}

func compactLogRecord(body []byte) plog.LogRecord {
	lr := plog.NewLogRecord()
	lr.Attributes().PutStr(AttrRecordEncoding, EncodingCompactV1)
	lr.Body().SetEmptyBytes().FromRaw(body)
	return lr
}

// malformedCase is a malformed compact record and what Decode says of it.
type malformedCase struct {
	name    string
	lr      func() plog.LogRecord
	wantErr string
}

func TestDecodeCompactMalformed(t *testing.T) {
	for _, tt := range malformedCases() {
		t.Run(tt.name, func(t *testing.T) {
			var r flowrecord.Record
			err := Decode(tt.lr(), &r, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// malformedCases are records malformed one way each, in the attributes or
// in one field of the body.
func malformedCases() []malformedCase {
	good := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), good)
	full := good.Body().Bytes().AsRaw()
	with := func(f func(b *compactBody)) []byte {
		b := &compactBody{}
		f(b)
		return b.b
	}
	return []malformedCase{
		{"unknown version", func() plog.LogRecord {
			lr := compactLogRecord(full)
			lr.Attributes().PutStr(AttrRecordEncoding, "compact/2")
			return lr
		}, `attribute "flowtel.record.encoding": unknown encoding (got "compact/2"; this collector reads "compact/1"); upgrade the gateways`},
		{"encoding not a string", func() plog.LogRecord {
			lr := compactLogRecord(full)
			lr.Attributes().PutInt(AttrRecordEncoding, 1)
			return lr
		}, `attribute "flowtel.record.encoding": want string, got Int`},
		{"bytes body without the encoding", func() plog.LogRecord {
			lr := plog.NewLogRecord()
			lr.Body().SetEmptyBytes().FromRaw(full)
			return lr
		}, `attribute "flowtel.record.encoding": missing on a record whose Body is bytes`},
		{"encoding without a bytes body", func() plog.LogRecord {
			lr := compactLogRecord(nil)
			lr.Body().SetStr("x")
			return lr
		}, `attribute "flowtel.record.encoding": "compact/1", but the Body is Str, want Bytes`},
		{"encoding and no body", func() plog.LogRecord {
			lr := plog.NewLogRecord()
			lr.Attributes().PutStr(AttrRecordEncoding, EncodingCompactV1)
			return lr
		}, `but the Body is Empty, want Bytes`},
		{"key not a string", func() plog.LogRecord {
			lr := compactLogRecord(full)
			lr.Attributes().PutInt(catalogue.AttrKey, 1)
			return lr
		}, `attribute "flow.key": want string, got Int`},
		{"empty body", func() plog.LogRecord { return compactLogRecord([]byte{}) },
			`attribute "flowtel.record.encoding" compact/1: field "flow.start": the Body ends before it (truncated)`},
		{"trailing bytes", func() plog.LogRecord { return compactLogRecord(append(full, 0, 0)) },
			`field "body": 2 bytes after the last field`},
		{"too many labels", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) { b.untilSourceLabels().uvarint(flowrecord.MaxLabels + 2) }))
		}, fmt.Sprintf(`field "source.k8s.pod.labels": %d labels (at most %d)`, flowrecord.MaxLabels+1, flowrecord.MaxLabels)},
		{"labels past the end", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) { b.untilSourceLabels().uvarint(101); b.str("k") }))
		}, `field "source.k8s.pod.labels": 100 labels run past the end of the Body (2 bytes left)`},
		{"duplicate label", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) {
				b.untilSourceLabels().uvarint(3)
				b.str("k")
				b.str("v")
				b.str("k")
				b.str("w")
			}))
		}, `field "source.k8s.pod.labels": 2 labels, 1 of them distinct`},
		{"duplicate label among many", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) {
				b.untilSourceLabels().uvarint(21)
				for i := range 20 {
					b.str(fmt.Sprint("k", i%19))
					b.str("v")
				}
			}))
		}, `field "source.k8s.pod.labels": 20 labels, 19 of them distinct`},
		{"string past the end", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) {
				b.untilSourceLabels().u8(0)
				b.uvarint(300)
				b.str("short")
			}))
		}, `field "source.k8s.workload.kind": length 300 runs past the end of the Body (6 bytes left)`},
		{"port out of range", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) {
				b.time(time.Time{})
				b.u8(6)
				b.addr(netip.MustParseAddr("10.0.0.1"))
				b.uvarint(70000)
			}))
		}, `field "source.port": value 70000 out of range [0, 65535]`},
		{"unknown endpoint kind", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) {
				b.time(time.Time{})
				b.u8(6)
				b.addr(netip.MustParseAddr("10.0.0.1"))
				b.uvarint(80)
				b.u8(9)
			}))
		}, `field "flow.source.kind": unknown value 9 (want at most 3)`},
		{"bad address tag", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) { b.time(time.Time{}); b.u8(6); b.u8(5) }))
		}, `field "source.address": address tag 5, want 0, 4, 16 or 17`},
		{"address cut short", func() plog.LogRecord {
			return compactLogRecord(with(func(b *compactBody) { b.time(time.Time{}); b.u8(6); b.u8(16); b.u8(1) }))
		}, `field "source.address": the Body ends before it (truncated)`},
		{"varint overflow", func() plog.LogRecord {
			return compactLogRecord([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
		}, `field "flow.start": varint overflows 64 bits`},
		{"aggregation presence", func() plog.LogRecord {
			b := flowrecordtest.EveryField()
			b.Aggregation = nil
			lr := plog.NewLogRecord()
			Encode(b, lr)
			raw := lr.Body().Bytes().AsRaw()
			raw[len(raw)-1] = 2
			return compactLogRecord(raw)
		}, `field "flow.aggregation": presence byte is 2, want 0 or 1`},
		{"missing source address", func() plog.LogRecord {
			r := flowrecordtest.EveryField()
			r.Source.Address = netip.Addr{}
			lr := plog.NewLogRecord()
			Encode(r, lr)
			return lr
		}, `missing required attribute "source.address"`},
	}
}

// Every truncation of a valid body is an error that names a field; none panics.
func TestDecodeCompactTruncated(t *testing.T) {
	lr := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), lr)
	full := lr.Body().Bytes().AsRaw()
	for n := range len(full) {
		var r flowrecord.Record
		err := Decode(compactLogRecord(full[:n]), &r, nil)
		require.Error(t, err, "body cut at %d of %d bytes", n, len(full))
		assert.True(t, strings.Contains(err.Error(), `field "`) || strings.Contains(err.Error(), "missing required attribute"), err.Error())
	}
}
