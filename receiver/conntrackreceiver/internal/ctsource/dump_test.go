package ctsource

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

const testSeq = 41

// wire is message m as a batch carries it, with sequence number seq.
func wire(t *testing.T, m netlink.Message, seq uint32) []byte {
	t.Helper()
	b := make([]byte, nlmsgHdrLen, nlmsgHdrLen+len(m.Data)+3)
	binary.NativeEndian.PutUint32(b[0:4], uint32(nlmsgHdrLen+len(m.Data)))
	binary.NativeEndian.PutUint16(b[4:6], uint16(m.Header.Type))
	binary.NativeEndian.PutUint32(b[8:12], seq)
	b = append(b, m.Data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// entry is a dumped UDP entry from port, as a batch carries it.
func entryWire(t *testing.T, port uint16, seq uint32) []byte {
	t.Helper()
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	return wire(t, entryMessage(t, 17, [4]netip.Addr{a, b}, [4]netip.Addr{b, a}, [4]uint16{port, 53, 53, port}), seq)
}

// doneWire ends a dump with errno (0: no error).
func doneWire(t *testing.T, errno unix.Errno) []byte {
	t.Helper()
	return wire(t, netlink.Message{Header: netlink.Header{Type: netlink.Done},
		Data: binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))}, testSeq)
}

// fakeRecv hands out batches in order, then repeats the last one forever;
// calls counts the reads.
func fakeRecv(batches [][]byte, calls *atomic.Int32) func([]byte) (int, error) {
	return func(buf []byte) (int, error) {
		i := min(int(calls.Add(1))-1, len(batches)-1)
		if batches[i] == nil {
			return 0, unix.ENOBUFS
		}
		return copy(buf, batches[i]), nil
	}
}

func newTestDumper() *dumper {
	d := &dumper{}
	for i := range d.bufs {
		d.bufs[i] = make([]byte, dumpBufferSize)
	}
	return d
}

func cat(bs ...[]byte) (out []byte) {
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// TestStream: every entry of a dump read in several batches is handed over
// once, in order, messages of another request are skipped, and the reads
// stop at the end of the dump; an errno in the end, a read error and an
// entry that does not decode are returned, and the reader is gone when
// stream returns.
func TestStream(t *testing.T) {
	malformed := entryWire(t, 9, testSeq)
	binary.NativeEndian.PutUint16(malformed[nlmsgHdrLen+nfgenmsgLen:], 3) // first attribute shorter than its header
	for _, tc := range []struct {
		name    string
		batches [][]byte
		ports   []uint16
		reads   int32
		err     error
	}{
		{"complete", [][]byte{
			cat(entryWire(t, 1, testSeq), entryWire(t, 2, testSeq)),
			cat(entryWire(t, 3, testSeq-1), entryWire(t, 4, testSeq)),
			cat(entryWire(t, 5, testSeq), doneWire(t, 0)),
		}, []uint16{1, 2, 4, 5}, 3, nil},
		{"errno", [][]byte{cat(entryWire(t, 1, testSeq)), doneWire(t, unix.EBUSY)}, []uint16{1}, 2, unix.EBUSY},
		{"read error", [][]byte{entryWire(t, 1, testSeq), nil}, []uint16{1}, 2, unix.ENOBUFS},
		{"does not decode", [][]byte{entryWire(t, 1, testSeq), cat(entryWire(t, 2, testSeq), malformed, entryWire(t, 3, testSeq)), entryWire(t, 4, testSeq)}, []uint16{1, 2}, 0, errMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			var ports []uint16
			n, err := newTestDumper().stream(testSeq, fakeRecv(tc.batches, &calls), func(c *store.Conn) { ports = append(ports, c.SrcPort) })
			switch {
			case tc.err == errMalformed && err != nil:
			case !errors.Is(err, tc.err):
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if n != len(tc.ports) || len(ports) != len(tc.ports) {
				t.Fatalf("%d entries handed over (%v), counted %d, want %v", len(ports), ports, n, tc.ports)
			}
			for i := range ports {
				if ports[i] != tc.ports[i] {
					t.Fatalf("entries %v, want %v", ports, tc.ports)
				}
			}
			reads := calls.Load()
			if tc.reads > 0 && reads != tc.reads {
				t.Fatalf("%d reads, want %d", reads, tc.reads)
			}
			time.Sleep(20 * time.Millisecond)
			if calls.Load() != reads || reads > int32(len(tc.batches))+dumpBuffers {
				t.Fatalf("reads went on after stream returned (%d, then %d)", reads, calls.Load())
			}
		})
	}
}

var errMalformed = errors.New("any decode error")
