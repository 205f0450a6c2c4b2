package flowstreamexporter

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

func entries(n int) []entry {
	out := make([]entry, n)
	for i := range out {
		out[i] = entry{rec: &flowrecord.Record{Key: string(rune('a' + i))}}
	}
	return out
}

func TestRingReaderFallsBehind(t *testing.T) {
	r := newRing(4)
	r.push(entries(10))
	got, next, dropped, _, closed := r.read(0, 100, nil)
	require.Equal(t, uint64(6), dropped, "records 0-5 were overwritten")
	require.Equal(t, uint64(10), next)
	require.False(t, closed)
	require.Len(t, got, 4)
	require.Equal(t, "g", got[0].rec.Key)
	require.Equal(t, "j", got[3].rec.Key)

	// A reader that kept up loses nothing.
	got, next, dropped, wake, _ := r.read(next, 100, nil)
	require.Empty(t, got)
	require.Zero(t, dropped)
	r.push(entries(1))
	<-wake // closed by the push
	got, _, dropped, _, _ = r.read(next, 100, nil)
	require.Len(t, got, 1)
	require.Zero(t, dropped)
}

func TestRingReadBatches(t *testing.T) {
	r := newRing(8)
	r.push(entries(5))
	got, next, _, _, _ := r.read(r.oldest(), 2, nil)
	require.Len(t, got, 2)
	require.Equal(t, uint64(2), next)
	got, next, _, _, _ = r.read(next, 10, got[:0])
	require.Len(t, got, 3)
	require.Equal(t, uint64(5), next)
}

func TestRingClose(t *testing.T) {
	r := newRing(2)
	r.push(entries(1))
	_, _, _, wake, _ := r.read(1, 10, nil)
	r.close()
	<-wake
	got, _, _, _, closed := r.read(0, 10, nil)
	require.True(t, closed)
	require.Len(t, got, 1, "what is held stays readable")
	r.push(entries(1)) // ignored after close
	got, _, _, _, _ = r.read(0, 10, nil)
	require.Len(t, got, 1)
}
