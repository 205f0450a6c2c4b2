package attrcodec

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

func roundTrip(t *testing.T, in *flowrecord.Record) *flowrecord.Record {
	t.Helper()
	lr := plog.NewLogRecord()
	Encode(in, lr)
	var out flowrecord.Record
	require.NoError(t, Decode(lr, &out))
	return &out
}

func TestRoundTripFullRecord(t *testing.T) {
	in := flowrecordtest.EveryField()
	out := roundTrip(t, in)
	assert.Equal(t, in, out)
}

func TestRoundTripMinimalRecord(t *testing.T) {
	in := &flowrecord.Record{
		Protocol:    17,
		Source:      flowrecord.Endpoint{Address: netip.MustParseAddr("fd00:10::5"), Port: 5353},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("fd00:10:1::7"), Port: 53},
	}
	out := roundTrip(t, in)
	assert.Equal(t, in, out)
	assert.Nil(t, out.Aggregation, "a record without aggregation must not gain one")
	assert.Nil(t, out.Source.PodLabels, "absent labels stay absent")
}

func TestEncodeLogRecordFields(t *testing.T) {
	r := flowrecordtest.EveryField()
	lr := plog.NewLogRecord()
	Encode(r, lr)
	assert.Equal(t, flowrecord.EventName, lr.EventName())
	assert.Equal(t, r.End, lr.Timestamp().AsTime())
	assert.Equal(t, r.Observed, lr.ObservedTimestamp().AsTime())
	assert.Equal(t, flowrecord.KeyHash(r.Key), lr.TraceID())
	attrs := lr.Attributes()
	v, _ := attrs.Get("network.transport")
	assert.Equal(t, "tcp", v.Str())
	v, _ = attrs.Get("network.type")
	assert.Equal(t, "ipv4", v.Str())
	v, _ = attrs.Get("flow.type")
	assert.Equal(t, "inter_node", v.Str())
	v, _ = attrs.Get("flow.conntrack.labels")
	assert.Equal(t, "00000000000000000000000700000009", v.Str())
	v, _ = attrs.Get("destination.k8s.pod.labels")
	assert.Equal(t, pcommon.ValueTypeMap, v.Type())
	assert.Equal(t, 0, v.Map().Len(), "a Pod without labels has an empty map")
}

func TestEncodeClearsPreviousAttributes(t *testing.T) {
	lr := plog.NewLogRecord()
	lr.Attributes().PutStr("stale", "x")
	Encode(flowrecordtest.EveryField(), lr)
	_, ok := lr.Attributes().Get("stale")
	assert.False(t, ok)
}

func TestCountersAlwaysWritten(t *testing.T) {
	lr := plog.NewLogRecord()
	Encode(&flowrecord.Record{Protocol: 6, Source: flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.1")},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.2")}}, lr)
	for _, name := range []string{"flow.packets.total", "flow.bytes.total", "flow.reverse.packets.delta"} {
		v, ok := lr.Attributes().Get(name)
		require.True(t, ok, name)
		assert.Equal(t, int64(0), v.Int(), name)
	}
}

func TestCounterSaturatesAtMaxInt64(t *testing.T) {
	r := flowrecordtest.EveryField()
	r.Stats.OctetTotal = 1<<64 - 1
	out := roundTrip(t, r)
	assert.Equal(t, uint64(1<<63-1), out.Stats.OctetTotal)
}

func TestDecodeMalformed(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(m pcommon.Map)
		wantErr string
	}{
		{"port has wrong type", func(m pcommon.Map) { m.PutStr("source.port", "80") }, `"source.port": want int, got Str`},
		{"port out of range", func(m pcommon.Map) { m.PutInt("destination.port", 70000) }, `"destination.port": value 70000 out of range`},
		{"negative counter", func(m pcommon.Map) { m.PutInt("flow.bytes.total", -1) }, `"flow.bytes.total": value -1 out of range`},
		{"bad source IP", func(m pcommon.Map) { m.PutStr("source.address", "10.0.0.300") }, `"source.address": "10.0.0.300" is not an IP address`},
		{"bad service IP", func(m pcommon.Map) { m.PutStr("flow.service.address", "") }, `"flow.service.address": "" is not an IP address`},
		{"missing source", func(m pcommon.Map) { m.Remove("source.address") }, `missing required attribute "source.address"`},
		{"missing destination", func(m pcommon.Map) { m.Remove("destination.address") }, `missing required attribute "destination.address"`},
		{"missing protocol", func(m pcommon.Map) { m.Remove("flow.protocol_identifier"); m.Remove("network.transport") }, `missing required attribute "flow.protocol_identifier"`},
		{"transport unknown, no protocol number", func(m pcommon.Map) { m.Remove("flow.protocol_identifier"); m.PutStr("network.transport", "unknown") },
			`attribute "network.transport": "unknown" names no protocol number, and "flow.protocol_identifier" is absent`},
		{"transport not a protocol name, no protocol number", func(m pcommon.Map) { m.Remove("flow.protocol_identifier"); m.PutStr("network.transport", "quic") },
			`attribute "network.transport": "quic" names no protocol number`},
		{"unknown flow type", func(m pcommon.Map) { m.PutStr("flow.type", "sideways") }, `"flow.type": unknown value "sideways"`},
		{"empty enum", func(m pcommon.Map) { m.PutStr("flow.end_reason", "") }, `"flow.end_reason": unknown value ""`},
		{"labels not a map", func(m pcommon.Map) { m.PutStr("source.k8s.pod.labels", "{}") }, `"source.k8s.pod.labels": want map, got Str`},
		{"label value not a string", func(m pcommon.Map) { m.PutEmptyMap("source.k8s.pod.labels").PutInt("app", 1) }, `label "app" is Int`},
		{"ct labels short", func(m pcommon.Map) { m.PutStr("flow.conntrack.labels", "abcd") }, `"flow.conntrack.labels": want 32 hex digits`},
		{"ct labels not hex", func(m pcommon.Map) { m.PutStr("flow.conntrack.labels", strings.Repeat("zz", 16)) }, `"flow.conntrack.labels": encoding/hex`},
		{"start before epoch", func(m pcommon.Map) { m.PutInt("flow.start", -5) }, `"flow.start": -5 is not a time`},
		{"evicted not bool", func(m pcommon.Map) { m.PutStr("flow.correlation.evicted", "yes") }, `"flow.correlation.evicted": want bool`},
		{"key not string", func(m pcommon.Map) { m.PutInt("flow.key", 1) }, `"flow.key": want string, got Int`},
		{"too many labels", func(m pcommon.Map) { fill(m.PutEmptyMap("source.k8s.pod.labels"), flowrecord.MaxLabels+1, "l") },
			fmt.Sprintf(`"source.k8s.pod.labels": %d labels (at most %d)`, flowrecord.MaxLabels+1, flowrecord.MaxLabels)},
		{"too many attributes", func(m pcommon.Map) { fill(m, flowrecord.MaxAttributes, "x.") }, fmt.Sprintf("attributes (at most %d)", flowrecord.MaxAttributes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := plog.NewLogRecord()
			Encode(flowrecordtest.EveryField(), lr)
			tt.mutate(lr.Attributes())
			var r flowrecord.Record
			err := Decode(lr, &r)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestDecodeMissingIsWrapped(t *testing.T) {
	var r flowrecord.Record
	err := Decode(plog.NewLogRecord(), &r)
	assert.True(t, errors.Is(err, ErrMissingAttribute))
}

func TestDecodeProtocolFromTransportName(t *testing.T) {
	lr := plog.NewLogRecord()
	lr.Attributes().PutStr("source.address", "192.0.2.1")
	lr.Attributes().PutStr("destination.address", "192.0.2.2")
	lr.Attributes().PutStr("network.transport", "sctp")
	var r flowrecord.Record
	require.NoError(t, Decode(lr, &r))
	assert.Equal(t, uint8(132), r.Protocol)
}

func TestDecodeIgnoresUnknownAttributes(t *testing.T) {
	lr := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), lr)
	lr.Attributes().PutStr("flow.some_future_field", "x")
	var r flowrecord.Record
	require.NoError(t, Decode(lr, &r))
	assert.Equal(t, flowrecordtest.EveryField(), &r)
}

func TestDecodeResetsRecord(t *testing.T) {
	r := flowrecordtest.EveryField()
	lr := plog.NewLogRecord()
	Encode(&flowrecord.Record{Protocol: 1, Source: flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.1")},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.2")}}, lr)
	require.NoError(t, Decode(lr, r))
	assert.Empty(t, r.Source.PodName)
	assert.Nil(t, r.Aggregation)
}

// Every exported field of flowrecord.Record (recursively) must be set by fullRecord, so
// the round-trip test proves every field has an attribute; fields carried by
// the resource are the exception.
func TestFullRecordSetsEveryField(t *testing.T) {
	onResource := map[string]bool{"Record.ClusterUID": true}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		if onResource[path] {
			return
		}
		switch v.Kind() {
		case reflect.Struct:
			if v.Type().PkgPath() != "" && v.Type().PkgPath() != reflect.TypeOf(flowrecord.Record{}).PkgPath() {
				break // time.Time, netip.Addr: leaf values
			}
			for i := 0; i < v.NumField(); i++ {
				walk(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
			return
		case reflect.Pointer:
			if v.IsNil() {
				t.Errorf("%s is nil", path)
				return
			}
			walk(path, v.Elem())
			return
		case reflect.Map:
			if v.IsNil() {
				t.Errorf("%s is nil", path)
			}
			return
		}
		if v.IsZero() {
			t.Errorf("%s is zero in fullRecord", path)
		}
	}
	walk("Record", reflect.ValueOf(flowrecordtest.EveryField()).Elem())
}

// fill adds n string entries prefix<i> to m in linear time (FromRaw; Put*
// search the map first).
func fill(m pcommon.Map, n int, prefix string) {
	raw := m.AsRaw()
	for i := range n {
		raw[fmt.Sprintf("%s%d", prefix, i)] = "v"
	}
	if err := m.FromRaw(raw); err != nil {
		panic(err)
	}
}

// A Decoder decodes a sequence of records as Decode does, reusing the label
// maps of the previous one: labels absent after present ones decode as nil,
// empty ones as empty, and stale labels never leak into the next record.
func TestDecoderReusesLabelMaps(t *testing.T) {
	full := flowrecordtest.EveryField()
	other := flowrecordtest.EveryField()
	other.Source.PodLabels = map[string]string{"only": "this"}
	other.Destination.PodLabels = map[string]string{}
	bare := flowrecordtest.EveryField()
	bare.Source.PodLabels, bare.Destination.PodLabels = nil, nil
	var d Decoder
	var r flowrecord.Record
	for _, in := range []*flowrecord.Record{full, other, bare, full, full} {
		lr := plog.NewLogRecord()
		Encode(in, lr)
		var want flowrecord.Record
		require.NoError(t, Decode(lr, &want))
		var prev map[string]string
		if r.Source.PodLabels != nil {
			prev = r.Source.PodLabels
		}
		require.NoError(t, d.Decode(lr, &r))
		assert.Equal(t, want, r)
		if prev != nil && in.Source.PodLabels != nil {
			assert.Equal(t, reflect.ValueOf(prev).Pointer(), reflect.ValueOf(r.Source.PodLabels).Pointer(), "the previous record's map is reused")
		}
	}
}

// Every attribute the codec writes is documented.
func TestEveryWrittenAttributeIsDocumented(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/flow-schema.md")
	require.NoError(t, err)
	lr := plog.NewLogRecord()
	Encode(flowrecordtest.EveryField(), lr)
	require.Equal(t, len(attributes), lr.Attributes().Len(), "a full record writes every attribute of the catalogue")
	for name := range lr.Attributes().All() {
		assert.Contains(t, string(raw), "| `"+name+"` |", "attribute %s is not in docs/flow-schema.md", name)
	}
}
