// Package grpcgzip makes gRPC's "gzip" content coding use
// github.com/klauspost/compress/gzip instead of the standard library's
// compress/gzip, in every process that links a flowtel component (each
// component imports this package for its side effect).
//
// Why: a gateway's OTLP exporter to a user's pipeline defaults to gzip, and
// the standard library's deflate was a third of the gateway's CPU
// (BenchmarkGateway; docs/architecture.md, D14). klauspost's deflate writes
// the same format (RFC 1952, read by any gzip decoder) in about half the CPU,
// and reads it faster too. The content coding stays "gzip", so peers, and a
// user's configuration (`compression: gzip`), see nothing change.
//
// gRPC keeps one compressor per name, the last registered winning; this
// package imports gRPC's own gzip package so that its registration runs first
// and this one replaces it.
package grpcgzip // import "github.com/flowtel/flowtel/internal/grpcgzip"

import (
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"google.golang.org/grpc/encoding"
	grpcgzip "google.golang.org/grpc/encoding/gzip" // registers first; replaced in init
)

// Name is the gRPC content coding this package serves.
const Name = grpcgzip.Name

// Level is the deflate level of what gRPC sends compressed with gzip:
// klauspost's default, which compresses flow records about as well as the
// standard library's default (the attribute form is very repetitive) at half
// its CPU.
const Level = gzip.DefaultCompression

func init() { encoding.RegisterCompressor(&codec{}) }

// codec is the gRPC compressor. Writers and readers are reused across
// messages: a deflate writer carries about a megabyte of state.
type codec struct {
	writers, readers sync.Pool
}

func (c *codec) Name() string { return Name }

// Compress returns a writer that compresses into w; gRPC closes it at the
// end of the message, which gives it back.
func (c *codec) Compress(w io.Writer) (io.WriteCloser, error) {
	pw, _ := c.writers.Get().(*pooledWriter)
	if pw == nil {
		zw, err := gzip.NewWriterLevel(w, Level)
		if err != nil {
			return nil, err
		}
		return &pooledWriter{Writer: zw, pool: &c.writers}, nil
	}
	pw.Reset(w)
	return pw, nil
}

// Decompress returns a reader of what r holds decompressed; gRPC closes it
// once it has read the message, which gives it back. A stream that is not
// gzip is an error here, before anything is read.
func (c *codec) Decompress(r io.Reader) (io.Reader, error) {
	pr, _ := c.readers.Get().(*pooledReader)
	if pr == nil {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		return &pooledReader{Reader: zr, pool: &c.readers}, nil
	}
	if err := pr.Reset(r); err != nil {
		c.readers.Put(pr)
		return nil, err
	}
	return pr, nil
}

type pooledWriter struct {
	*gzip.Writer
	pool *sync.Pool
}

// Close finishes the gzip stream and returns the writer to its pool.
func (w *pooledWriter) Close() error {
	err := w.Writer.Close()
	w.pool.Put(w)
	return err
}

type pooledReader struct {
	*gzip.Reader
	pool *sync.Pool
}

// Close returns the reader to its pool (gRPC calls it exactly once).
func (r *pooledReader) Close() error {
	err := r.Reader.Close()
	r.pool.Put(r)
	return err
}
