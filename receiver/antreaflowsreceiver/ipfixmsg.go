package antreaflowsreceiver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// The IPFIX message structure (RFC 7011): a 16-byte message header, then
// sets, each a 4-byte set header and its records. Set ID 2 carries
// templates, 3 options templates (ignored: Antrea's agents send none), 256
// and up data records of that template.
const (
	ipfixVersion       = 10
	msgHeaderLen       = 16
	setHeaderLen       = 4
	templateSetID      = 2
	optionsTemplateSet = 3
	minDataSetID       = 256
	varLength          = 0xffff
	enterpriseBit      = 0x8000
)

// errMalformed marks a message whose structure cannot be read: it is refused
// whole (refusal reason malformed_message).
var errMalformed = errors.New("malformed IPFIX message")

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, a...))
}

// msgHeader is the part of an IPFIX message header the receiver uses.
type msgHeader struct {
	length     uint16
	exportTime time.Time
	// sequence is the count of data records the exporter sent in the
	// observation domain before this message, modulo 2^32 (RFC 7011 §3.1).
	sequence uint32
	domain   uint32
}

func readHeader(b []byte) (msgHeader, error) {
	if len(b) < msgHeaderLen {
		return msgHeader{}, malformed("%d bytes, shorter than a message header", len(b))
	}
	if v := binary.BigEndian.Uint16(b); v != ipfixVersion {
		return msgHeader{}, malformed("version %d, not IPFIX (10)", v)
	}
	h := msgHeader{
		length:     binary.BigEndian.Uint16(b[2:]),
		exportTime: time.Unix(int64(binary.BigEndian.Uint32(b[4:])), 0),
		sequence:   binary.BigEndian.Uint32(b[8:]),
		domain:     binary.BigEndian.Uint32(b[12:]),
	}
	if h.length < msgHeaderLen {
		return msgHeader{}, malformed("length %d, shorter than a message header", h.length)
	}
	return h, nil
}

// templateField is one field specifier of a template.
type templateField struct {
	enterprise uint32
	id         uint16
	length     uint16
	set        setter // nil: an IE the receiver does not read
}

// template is a data record layout an exporter announced.
type template struct {
	fields []templateField
	// minLen is the shortest record: fixed lengths, one byte per variable field.
	minLen int
}

// parseTemplateSet reads the template records of a template set, calling add
// for each template and withdraw for each withdrawal (a field count of 0).
// A withdrawal of template ID 2, the template set's ID, withdraws all the
// templates of the observation domain (RFC 7011 §8.1): withdraw gets
// templateSetID.
func parseTemplateSet(b []byte, add func(id uint16, t *template), withdraw func(id uint16)) error {
	for len(b) >= 4 {
		id, count := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		b = b[4:]
		if id == templateSetID && count == 0 {
			withdraw(id)
			continue
		}
		if id < minDataSetID {
			return malformed("template ID %d, below 256", id)
		}
		if count == 0 {
			withdraw(id)
			continue
		}
		// Each field specifier takes at least 4 bytes: a count the set
		// cannot hold is refused before anything is allocated for it.
		if count*4 > len(b) {
			return malformed("template %d claims %d fields, its set holds at most %d", id, count, len(b)/4)
		}
		t := &template{fields: make([]templateField, 0, count)}
		for range count {
			if len(b) < 4 {
				return malformed("template %d ends inside a field specifier", id)
			}
			f := templateField{id: binary.BigEndian.Uint16(b), length: binary.BigEndian.Uint16(b[2:])}
			b = b[4:]
			if f.id&enterpriseBit != 0 {
				if len(b) < 4 {
					return malformed("template %d ends inside an enterprise number", id)
				}
				f.id &^= enterpriseBit
				f.enterprise = binary.BigEndian.Uint32(b)
				b = b[4:]
			}
			if f.length == 0 {
				return malformed("template %d: field %d/%d has length 0", id, f.enterprise, f.id)
			}
			f.set = setterFor(f.enterprise, f.id)
			if f.length == varLength {
				t.minLen++
			} else {
				t.minLen += int(f.length)
			}
			t.fields = append(t.fields, f)
		}
		add(id, t)
	}
	// Up to 3 bytes of padding may follow the last template record.
	return nil
}

// nextRecord splits the first data record of b off according to t, calling
// each known field's setter on its value. rest is what follows the record;
// bad is a value that does not fit its IE (the record is refused, the next
// one is read); err is a record that does not fit in the set (the rest of
// the set cannot be trusted).
func (t *template) nextRecord(b []byte, into *flowrecord.Record) (rest []byte, bad, err error) {
	for i := range t.fields {
		f := &t.fields[i]
		n := int(f.length)
		if f.length == varLength {
			if len(b) < 1 {
				return nil, nil, fmt.Errorf("field %d/%d: record ends before its length", f.enterprise, f.id)
			}
			n, b = int(b[0]), b[1:]
			if n == 255 {
				if len(b) < 2 {
					return nil, nil, fmt.Errorf("field %d/%d: record ends before its length", f.enterprise, f.id)
				}
				n, b = int(binary.BigEndian.Uint16(b)), b[2:]
			}
		}
		if len(b) < n {
			return nil, nil, fmt.Errorf("field %d/%d: %d bytes, record ends after %d", f.enterprise, f.id, n, len(b))
		}
		if f.set != nil && bad == nil {
			if err := f.set(into, b[:n]); err != nil {
				bad = fmt.Errorf("field %d/%d: %w", f.enterprise, f.id, err)
			}
		}
		b = b[n:]
	}
	return b, bad, nil
}
