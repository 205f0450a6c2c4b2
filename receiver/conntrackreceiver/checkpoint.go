package conntrackreceiver

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// checkpoint keeps, in a storage extension (the collector's storage API),
// what the receiver last exported per connection: conntrack ID, tuple and the
// totals its last delta was taken against. A restarted receiver resumes from
// it, so the first delta of a long-lived connection does not repeat history.
// One key per connection, written in one batch per poll for the connections
// exported in that poll, deleted with their end-of-flow record.
type checkpoint struct {
	client storage.Client
	walker storage.Walker
	ops    []*storage.Operation
	arena  []byte // keys and values of ops
}

// Stored key and value layouts (version 3; version 2, written by earlier
// releases, is read too, so an upgrade resumes; values of another version
// are counted as bad and ignored):
//
//	key:   'c' | id u32 | src [16] | dst [16] | sport u16 | dport u16 | proto u8
//	value: 3 | orig packets, bytes u64 | reply packets, bytes u64 | tcp state u8 | exported at (Unix ns) i64 | conntrack start (Unix ns, 0: unknown) i64 | flags u8
//
// flags bit 0 (closed): the record saved was the connection's end-of-flow
// record, exported while conntrack still held it (version 2 has no flags:
// it only saved live connections).
const (
	checkpointKeyLen     = 1 + 4 + 16 + 16 + 2 + 2 + 1
	checkpointValueLenV2 = 1 + 4*8 + 1 + 8 + 8
	checkpointValueLen   = checkpointValueLenV2 + 1
	checkpointKeyTag     = 'c'
	checkpointVersion    = 3
	checkpointFlagClosed = 1
)

// openCheckpoint gets a storage client for this receiver from the extension
// named in the configuration.
func openCheckpoint(ctx context.Context, host component.Host, ext, self component.ID) (*checkpoint, error) {
	e, ok := host.GetExtensions()[ext]
	if !ok {
		return nil, fmt.Errorf("storage: no such extension in the service (got %q); configure it and list it in service.extensions", ext)
	}
	se, ok := e.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: not a storage extension (got %q); name a storage extension such as file_storage", ext)
	}
	client, err := se.GetClient(ctx, component.KindReceiver, self, "")
	if err != nil {
		return nil, fmt.Errorf("storage: cannot get a client: %w (got %q); check the extension's configuration", err, ext)
	}
	w, ok := client.(storage.Walker)
	if !ok {
		_ = client.Close(ctx)
		return nil, fmt.Errorf("storage: its client cannot list what it holds, which resuming needs (got %q); use file_storage", ext)
	}
	return &checkpoint{client: client, walker: w}, nil
}

// load returns every connection the previous run saved. Entries it cannot
// read are deleted and counted in bad.
func (c *checkpoint) load(ctx context.Context) (saved []store.Exported, bad int, err error) {
	err = c.walker.Walk(ctx, func(key string, value []byte) ([]*storage.Operation, error) {
		x, ok := decodeExported(key, value)
		if !ok {
			bad++
			return []*storage.Operation{storage.DeleteOperation(key)}, nil
		}
		saved = append(saved, x)
		return nil, nil
	})
	return saved, bad, err
}

// note queues what the accepted exports leave: the new totals of a live
// connection, or the removal of an ended one.
func (c *checkpoint) note(xs []store.Export, at int64) {
	if c == nil {
		return
	}
	for i := range xs {
		x := store.ExportedOf(&xs[i], at)
		key := c.key(&x)
		if xs[i].Reason == flowrecord.EndReasonEndOfFlow && !xs[i].Lingers {
			// Gone from conntrack: nothing of it can be seen again. A
			// connection whose only record this is (deltas = totals: the
			// short ones DESTROY events bring) was never saved.
			if xs[i].OrigDelta != x.Orig || xs[i].ReplyDelta != x.Reply {
				c.ops = append(c.ops, storage.DeleteOperation(key))
			}
			continue
		}
		// Live, or ended while conntrack still holds it (saved as closed
		// until the store deletes it: forget).
		c.ops = append(c.ops, storage.SetOperation(key, c.value(&x)))
	}
}

// forget queues the removal of connections that will not be seen again.
func (c *checkpoint) forget(xs []store.Exported) {
	if c == nil {
		return
	}
	for i := range xs {
		c.ops = append(c.ops, storage.DeleteOperation(c.key(&xs[i])))
	}
}

// commit writes the queued operations in one batch.
func (c *checkpoint) commit(ctx context.Context) error {
	if c == nil || len(c.ops) == 0 {
		return nil
	}
	err := c.client.Batch(ctx, c.ops...)
	clear(c.ops)
	c.ops, c.arena = c.ops[:0], c.arena[:0]
	return err
}

func (c *checkpoint) close(ctx context.Context) error {
	if c == nil {
		return nil
	}
	return c.client.Close(ctx)
}

func (c *checkpoint) key(x *store.Exported) string {
	b := make([]byte, 0, checkpointKeyLen)
	b = append(b, checkpointKeyTag)
	b = binary.BigEndian.AppendUint32(b, x.ID)
	src, dst := x.Src.As16(), x.Dst.As16()
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	b = binary.BigEndian.AppendUint16(b, x.SrcPort)
	b = binary.BigEndian.AppendUint16(b, x.DstPort)
	b = append(b, x.Proto)
	return string(b)
}

// value encodes into the arena; the slice stays valid until commit.
func (c *checkpoint) value(x *store.Exported) []byte {
	start := len(c.arena)
	b := append(c.arena, checkpointVersion)
	for _, v := range []uint64{x.Orig.Packets, x.Orig.Bytes, x.Reply.Packets, x.Reply.Bytes} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = append(b, x.TCPState)
	b = binary.BigEndian.AppendUint64(b, uint64(x.At))
	b = binary.BigEndian.AppendUint64(b, uint64(x.Start))
	var flags byte
	if x.Closed {
		flags |= checkpointFlagClosed
	}
	b = append(b, flags)
	c.arena = b
	return b[start:len(b):len(b)]
}

func decodeExported(key string, value []byte) (store.Exported, bool) {
	var x store.Exported
	if len(key) != checkpointKeyLen || key[0] != checkpointKeyTag || len(value) == 0 {
		return x, false
	}
	switch {
	case value[0] == checkpointVersion && len(value) == checkpointValueLen:
		x.Closed = value[checkpointValueLen-1]&checkpointFlagClosed != 0
	case value[0] == 2 && len(value) == checkpointValueLenV2:
	default:
		return x, false
	}
	k := []byte(key[1:])
	x.ID = binary.BigEndian.Uint32(k)
	x.Src = netip.AddrFrom16([16]byte(k[4:20])).Unmap()
	x.Dst = netip.AddrFrom16([16]byte(k[20:36])).Unmap()
	x.SrcPort = binary.BigEndian.Uint16(k[36:])
	x.DstPort = binary.BigEndian.Uint16(k[38:])
	x.Proto = k[40]
	v := value[1:]
	x.Orig.Packets, x.Orig.Bytes = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
	x.Reply.Packets, x.Reply.Bytes = binary.BigEndian.Uint64(v[16:]), binary.BigEndian.Uint64(v[24:])
	x.TCPState = v[32]
	x.At = int64(binary.BigEndian.Uint64(v[33:]))
	x.Start = int64(binary.BigEndian.Uint64(v[41:]))
	return x, true
}
