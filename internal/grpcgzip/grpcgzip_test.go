package grpcgzip

import (
	"bytes"
	stdgzip "compress/gzip"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc/encoding"

	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

func TestReplacesGRPCGzip(t *testing.T) {
	c := encoding.GetCompressor("gzip")
	require.NotNil(t, c)
	assert.IsType(t, &codec{}, c, "gRPC's gzip compressor is not this package's: its init ran before gRPC's")
}

// compress and decompress go through the registered compressor as gRPC does.
func compress(t testing.TB, data []byte) []byte {
	var buf bytes.Buffer
	w, err := encoding.GetCompressor(Name).Compress(&buf)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func decompress(data []byte) ([]byte, error) {
	r, err := encoding.GetCompressor(Name).Decompress(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(r)
	if cerr := r.(io.Closer).Close(); err == nil {
		err = cerr
	}
	return out, err
}

// What the codec writes is gzip to any decoder, and it reads what the
// standard library writes: peers on either side see the same content coding.
func TestInteroperatesWithTheStandardLibrary(t *testing.T) {
	payload := otlpPayload(t, 300)
	for round := range 3 { // the pooled writers and readers, reused
		ours := compress(t, payload)
		zr, err := stdgzip.NewReader(bytes.NewReader(ours))
		require.NoError(t, err)
		got, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.Equal(t, payload, got, "round %d: the standard library reads what the codec wrote", round)

		var std bytes.Buffer
		zw := stdgzip.NewWriter(&std)
		_, _ = zw.Write(payload)
		require.NoError(t, zw.Close())
		got, err = decompress(std.Bytes())
		require.NoError(t, err)
		require.Equal(t, payload, got, "round %d: the codec reads what the standard library wrote", round)
	}
	got, err := decompress(compress(t, nil))
	require.NoError(t, err)
	assert.Empty(t, got, "an empty message")
}

// A peer that sends something that is not gzip gets an error, and the codec
// keeps working for the next message.
func TestGarbage(t *testing.T) {
	_, err := decompress([]byte("this is not a gzip stream at all"))
	require.Error(t, err)
	good := compress(t, []byte("flow"))
	truncated := good[:len(good)-6]
	_, err = decompress(truncated)
	require.Error(t, err, "a stream cut short")
	got, err := decompress(good)
	require.NoError(t, err)
	assert.Equal(t, "flow", string(got))
}

// gRPC compresses and decompresses on many goroutines at once.
func TestConcurrentMessagesStayApart(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				msg := bytes.Repeat(fmt.Appendf(nil, "goroutine %d message %d;", g, i), 100+i)
				got, err := decompress(compress(t, msg))
				if !assert.NoError(t, err) || !assert.Equal(t, msg, got) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// otlpPayload is an OTLP logs request of n paired flow records in the
// attribute form, what a gateway sends to a user's pipeline.
func otlpPayload(t testing.TB, n int) []byte {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := range n {
		r := flowrecordtest.Full(i%7 == 0)
		if r.Source.Address.Is4() {
			r.Source.Address = netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})
		}
		r.Source.Port = uint16(10000 + i)
		r.Source.PodName = fmt.Sprintf("client-%d", i%97)
		r.Stats.OctetTotal += uint64(i * 1499)
		r.Key = r.CorrelationKey()
		attrcodec.Encode(r, lrs.AppendEmpty())
	}
	raw, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	require.NoError(t, err)
	return raw
}

// BenchmarkCompress is the CPU of compressing one gateway export request
// (1000 paired records) with the standard library's gzip, as gRPC did, and
// with this codec; ratio is raw bytes per compressed byte.
func BenchmarkCompress(b *testing.B) {
	payload := otlpPayload(b, 1000)
	var out bytes.Buffer
	report := func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportMetric(float64(len(payload))/float64(out.Len()), "ratio")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/record")
	}
	b.Run("stdlib", func(b *testing.B) {
		zw := stdgzip.NewWriter(io.Discard)
		for b.Loop() {
			out.Reset()
			zw.Reset(&out)
			_, _ = zw.Write(payload)
			_ = zw.Close()
		}
		report(b)
	})
	b.Run("grpcgzip", func(b *testing.B) {
		c := encoding.GetCompressor(Name)
		for b.Loop() {
			out.Reset()
			w, _ := c.Compress(&out)
			_, _ = w.Write(payload)
			_ = w.Close()
		}
		report(b)
	})
}
