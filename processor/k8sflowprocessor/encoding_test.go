package k8sflowprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
)

// With encoding: compact every record leaves in the compact encoding (those
// passed at once, a relay leg, one released from the hold) and decodes to
// what encoding: attributes emits for the same input.
func TestEncodingCompact(t *testing.T) {
	run := func(encoding string) *holdingProcessor {
		cs := fake.NewClientset(clusterObjects()...)
		cfg := nodeConfig("node-b")
		cfg.Encoding, cfg.HoldUnresolved, cfg.HoldMaxRecords = encoding, 100*time.Millisecond, 10
		h := startHolding(t, cfg, func(*Config) (kubernetes.Interface, error) { return cs, nil }, func() time.Time { return t0.Add(time.Hour) })
		h.send(t,
			nodePortCases(v4)[4].record(), // forwarded to another Node: a relay leg too
			nodePortCases(v4)[1].record(),
			flowCase{reporter: "node-b", src: hp("10.244.2.77", 40000), dst: hp(v4.external, 443)}.record()) // held, then expires
		eventually(t, "the held record is released", func() bool { return h.sink.LogRecordCount() == 4 })
		return h
	}
	attrs, compact := run(EncodingAttributes), run(EncodingCompact)
	assert.Equal(t, attrs.exported(t), compact.exported(t))
	for _, ld := range compact.sink.AllLogs() {
		lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		for i := range lrs.Len() {
			lr := lrs.At(i)
			assert.Equal(t, pcommon.ValueTypeBytes, lr.Body().Type())
			v, ok := lr.Attributes().Get(compactcodec.AttrRecordEncoding)
			require.True(t, ok)
			assert.Equal(t, compactcodec.EncodingCompactV1, v.Str())
			_, ok = lr.Attributes().Get(catalogue.AttrKey)
			assert.True(t, ok, "load_balancing routes on flow.key")
		}
	}
	for _, ld := range attrs.sink.AllLogs() {
		lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
		assert.Equal(t, pcommon.ValueTypeEmpty, lr.Body().Type())
	}
}
