//go:build integration

package e2e

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmware/go-ipfix/pkg/registry"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/antreaagent"
)

// ipfixCounter is an IPFIX collector over TCP that only counts: the data
// records of every connection, by flow type, and the inter-Node ones that are
// not paired (no packets counted by one of the two Nodes, in the aggregate
// layout's per-Node totals). It reads the message, set and template
// structure of RFC 7011 and the few fields it counts by, so that the sink of
// a load run costs little CPU (the go-ipfix collector keeps and logs every
// record).
type ipfixCounter struct {
	ln                    net.Listener
	records, intra, inter atomic.Int64
	dataMessages          atomic.Int64 // messages that carried records
	notPaired, otherType  atomic.Int64
	last                  atomic.Int64 // unix nanoseconds of the last message with records
	roles                 map[ieID]int
	mu                    sync.Mutex
	errs                  []error
	wg                    sync.WaitGroup
}

type ieID struct {
	id         uint16
	enterprise uint32
}

// What the counter reads of a record.
const (
	roleNone = iota
	roleFlowType
	rolePacketsFromSource
	rolePacketsFromDestination
)

type countedField struct {
	length uint16 // 65535: variable
	role   int
}

func startIPFIXCounter(t testing.TB) *ipfixCounter {
	c := &ipfixCounter{roles: map[ieID]int{}}
	for name, role := range map[string]int{"flowType": roleFlowType,
		"packetTotalCountFromSourceNode": rolePacketsFromSource, "packetTotalCountFromDestinationNode": rolePacketsFromDestination} {
		e, err := antreaagent.Element(name, registry.AntreaEnterpriseID)
		require.NoError(t, err, name)
		c.roles[ieID{e.ElementId, e.EnterpriseId}] = role
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c.ln = ln
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				defer conn.Close()
				if err := c.read(bufio.NewReaderSize(conn, 1<<20)); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					c.mu.Lock()
					c.errs = append(c.errs, err)
					c.mu.Unlock()
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); c.wg.Wait() })
	return c
}

func (c *ipfixCounter) addr() string { return c.ln.Addr().String() }

// lastRecord is when the last record came; zero: none yet.
func (c *ipfixCounter) lastRecord() time.Time {
	if n := c.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func (c *ipfixCounter) errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// read counts the messages of one exporter's connection (its templates are
// its own).
func (c *ipfixCounter) read(r *bufio.Reader) error {
	templates := map[uint16][]countedField{}
	header := make([]byte, 16)
	var msg []byte
	for {
		if _, err := io.ReadFull(r, header); err != nil {
			return err
		}
		if v := binary.BigEndian.Uint16(header); v != 10 {
			return fmt.Errorf("IPFIX version %d", v)
		}
		n := int(binary.BigEndian.Uint16(header[2:]))
		if n < 16 {
			return fmt.Errorf("message length %d", n)
		}
		if cap(msg) < n-16 {
			msg = make([]byte, 65535)
		}
		msg = msg[:n-16]
		if _, err := io.ReadFull(r, msg); err != nil {
			return err
		}
		got, err := c.sets(msg, templates)
		if err != nil {
			return err
		}
		if got > 0 {
			c.records.Add(int64(got))
			c.dataMessages.Add(1)
			c.last.Store(time.Now().UnixNano())
		}
	}
}

// sets reads a message's sets and returns how many data records it carried.
func (c *ipfixCounter) sets(sets []byte, templates map[uint16][]countedField) (int, error) {
	be := binary.BigEndian
	records := 0
	for len(sets) >= 4 {
		id, n := be.Uint16(sets), int(be.Uint16(sets[2:]))
		if n < 4 || n > len(sets) {
			return records, fmt.Errorf("set length %d of %d", n, len(sets))
		}
		body := sets[4:n]
		sets = sets[n:]
		switch {
		case id == 2: // templates
			for len(body) >= 4 {
				tid, count := be.Uint16(body), int(be.Uint16(body[2:]))
				body = body[4:]
				fields := make([]countedField, 0, count)
				for range count {
					if len(body) < 4 {
						return records, fmt.Errorf("template %d cut short", tid)
					}
					ie := ieID{id: be.Uint16(body)}
					length := be.Uint16(body[2:])
					body = body[4:]
					if ie.id&0x8000 != 0 {
						if len(body) < 4 {
							return records, fmt.Errorf("template %d cut short", tid)
						}
						ie.id, ie.enterprise = ie.id&0x7fff, be.Uint32(body)
						body = body[4:]
					}
					fields = append(fields, countedField{length, c.roles[ie]})
				}
				templates[tid] = fields
			}
		case id >= 256:
			fields, ok := templates[id]
			if !ok {
				return records, fmt.Errorf("data set of unknown template %d", id)
			}
			for len(body) > 0 {
				if err := c.record(&body, fields); err != nil {
					return records, fmt.Errorf("template %d: %w", id, err)
				}
				records++
			}
		}
	}
	return records, nil
}

// record reads one data record off body and counts it.
func (c *ipfixCounter) record(body *[]byte, fields []countedField) error {
	b := *body
	var flowType uint8
	var fromSource, fromDestination uint64
	for _, f := range fields {
		n := int(f.length)
		if n == 65535 {
			if len(b) < 1 {
				return io.ErrUnexpectedEOF
			}
			n, b = int(b[0]), b[1:]
			if n == 255 {
				if len(b) < 2 {
					return io.ErrUnexpectedEOF
				}
				n, b = int(binary.BigEndian.Uint16(b)), b[2:]
			}
		}
		if n > len(b) {
			return io.ErrUnexpectedEOF
		}
		v := b[:n]
		b = b[n:]
		switch {
		case f.role == roleFlowType && n == 1:
			flowType = v[0]
		case f.role == rolePacketsFromSource && n == 8:
			fromSource = binary.BigEndian.Uint64(v)
		case f.role == rolePacketsFromDestination && n == 8:
			fromDestination = binary.BigEndian.Uint64(v)
		}
	}
	*body = b
	switch flowrecord.FlowType(flowType) {
	case flowrecord.FlowTypeIntraNode:
		c.intra.Add(1)
	case flowrecord.FlowTypeInterNode:
		c.inter.Add(1)
		if fromSource == 0 || fromDestination == 0 {
			c.notPaired.Add(1)
		}
	default:
		c.otherType.Add(1)
	}
	return nil
}

// TestIPFIXCounter: the counter reads what go-ipfix writes (the agent's
// templates, with enterprise IEs and strings) and counts by flow type; the
// agent layout has no per-Node totals, so its inter-Node records count as not
// paired.
func TestIPFIXCounter(t *testing.T) {
	now := time.Now()
	stream, err := antreaagent.Capture(agentNodes[0].name, func(a *antreaagent.Agent) error {
		for i := range 3 {
			if err := a.Send(false, agentLoadRecord(interConn(i), 0, now)); err != nil {
				return err
			}
		}
		return a.Send(false, agentLoadRecord(intraConn(0, 0), 0, now))
	})
	require.NoError(t, err)
	c := startIPFIXCounter(t)
	conn, err := net.Dial("tcp", c.addr())
	require.NoError(t, err)
	_, err = conn.Write(stream)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	require.Eventually(t, func() bool { return c.records.Load() == 4 }, 5*time.Second, 10*time.Millisecond)
	require.Empty(t, c.errors())
	require.Equal(t, [4]int64{3, 3, 1, 0}, [4]int64{c.inter.Load(), c.notPaired.Load(), c.intra.Load(), c.otherType.Load()})
}
