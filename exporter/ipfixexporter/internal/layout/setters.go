package layout

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/netip"

	"github.com/vmware/go-ipfix/pkg/entities"

	"github.com/flowtel/flowtel/internal/antreawire"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// opKind is how an IE's value is read from a Record and written.
type opKind uint8

const (
	opUint8 opKind = iota
	opUint16
	opUint32
	opUint64
	opTime     // dateTimeSeconds
	opString   // a string value
	opLabels   // Pod labels as a JSON string
	opAddrText // an address as a string
	opIPv4     // an ipv4Address IE
	opIPv6     // an ipv6Address IE
	opUUID     // a Kubernetes UID as a 16-byte octetArray
)

// op is one IE of a template's write plan: it writes the IE's value for a
// Record straight onto the wire (appendTo) or, for the JSON records, into the
// go-ipfix element (set). The values follow what Antrea writes. An op owns the
// caches of the texts it wrote and scratch buffers, so it encodes without
// allocating; it is not safe for concurrent use.
type op struct {
	kind opKind
	name string
	v    catalogue.Value
	// template6 is the template's family, for the error of an address of the other family.
	template6 bool
	texts     *antreawire.Texts // opLabels, opAddrText
	scratch   []byte            // set: the address or UUID bytes
}

// newOp returns the op of an IE of the field catalogue in a template of the
// given family, chosen by the IE's type and the kind of the value it carries.
func newOp(ie catalogue.IE, ipv6 bool) (op, error) {
	o := op{name: ie.Name, v: ie.Value, template6: ipv6}
	switch k := ie.Value.Kind; {
	case ie.Type == catalogue.Unsigned8 && (k == catalogue.KindUint8 || k == catalogue.KindEnum):
		o.kind = opUint8
	case ie.Type == catalogue.Unsigned16 && k == catalogue.KindUint16:
		o.kind = opUint16
	case ie.Type == catalogue.Unsigned32 && k == catalogue.KindUint32:
		o.kind = opUint32
	case ie.Type == catalogue.Unsigned64 && k == catalogue.KindUint64:
		o.kind = opUint64
	case ie.Type == catalogue.DateTimeSeconds && k == catalogue.KindTime:
		o.kind = opTime
	case ie.Type == catalogue.String && k == catalogue.KindString:
		o.kind = opString
	case ie.Type == catalogue.String && k == catalogue.KindLabels:
		o.kind, o.texts = opLabels, &antreawire.Texts{}
	case ie.Type == catalogue.String && k == catalogue.KindAddr:
		o.kind, o.texts = opAddrText, &antreawire.Texts{}
	case ie.Type == catalogue.IPv4Address && k == catalogue.KindAddr:
		o.kind, o.scratch = opIPv4, make(net.IP, net.IPv4len)
	case ie.Type == catalogue.IPv6Address && k == catalogue.KindAddr:
		o.kind, o.scratch = opIPv6, make(net.IP, net.IPv6len)
	case ie.Type == catalogue.OctetArray && k == catalogue.KindString:
		o.kind, o.scratch = opUUID, make([]byte, 16)
	default:
		return op{}, fmt.Errorf("IE %s: no way to write a %s value as %s", ie.Name, k, ie.Type)
	}
	return o, nil
}

// fixedLen is the length of the IE's value on the wire; 1 (the length byte
// of an empty value) for the variable-length strings.
func (o *op) fixedLen() int {
	switch o.kind {
	case opUint8:
		return 1
	case opUint16:
		return 2
	case opUint32, opTime, opIPv4:
		return 4
	case opUint64:
		return 8
	case opIPv6, opUUID:
		return 16
	}
	return 1
}

// text is the value of a string IE: Pod labels as Antrea writes them, a JSON
// object (encoding/json's rendering of the map), "{}" for a Pod without
// labels, "" when labels were not collected; the Egress IP as text, "" when
// there is none.
func (o *op) text(r *flowrecord.Record) (string, error) {
	var s string
	switch o.kind {
	case opLabels:
		s = o.texts.Labels(o.v.Labels(r))
	case opAddrText:
		s = o.texts.Addr(o.v.Addr(r).Unmap())
	default:
		s = o.v.String(r)
	}
	if len(s) > maxString {
		return "", o.tooLong(s)
	}
	return s, nil
}

func (o *op) tooLong(s string) error {
	return fmt.Errorf("IE %s: value of %d bytes exceeds the IPFIX variable-length limit of %d bytes", o.name, len(s), maxString)
}

// addr is the address to write in an address IE: the zero Addr for none,
// written as the zero address (0.0.0.0 or ::), as in Antrea. An address of
// the other family fails the record: the IEs of a template are of its family
// (chosen by the source address), but for the proxy exporter's pair, whose
// values are of their IE's family or none.
func (o *op) addr(r *flowrecord.Record) (netip.Addr, error) {
	a := o.v.Addr(r).Unmap()
	if a.IsValid() && a.Is6() != (o.kind == opIPv6) {
		return netip.Addr{}, fmt.Errorf("IE %s: address %s is not of the template's family (IPv6=%t, chosen by the source address)", o.name, a, o.template6)
	}
	return a, nil
}

// putAddr writes the address of an address IE into dst (4 or 16 bytes).
func (o *op) putAddr(r *flowrecord.Record, dst []byte) error {
	a, err := o.addr(r)
	switch {
	case err != nil:
		return err
	case !a.IsValid():
		clear(dst)
	case a.Is4():
		b := a.As4()
		copy(dst, b[:])
	default:
		b := a.As16()
		copy(dst, b[:])
	}
	return nil
}

// putUUID writes a Kubernetes UID as 16 raw bytes into dst; an empty or
// unparsable UID is the nil UUID, as in Antrea.
func (o *op) putUUID(r *flowrecord.Record, dst []byte) {
	if !ParseUUID(o.v.String(r), dst) {
		clear(dst)
	}
}

// appendOps appends the values of ops for r as go-ipfix encodes them in a
// data record: unsigned integers and dateTimeSeconds big-endian, addresses
// and UUIDs as their bytes, strings with a one-byte length below 255, else
// 255 and a two-byte length. On error (naming the IE) buf is returned as it was.
func appendOps(buf []byte, ops []op, r *flowrecord.Record) ([]byte, error) {
	n := len(buf)
	for i := range ops {
		o := &ops[i]
		switch o.kind {
		case opUint8:
			buf = append(buf, o.v.Uint8(r))
		case opUint16:
			buf = binary.BigEndian.AppendUint16(buf, o.v.Uint16(r))
		case opUint32:
			buf = binary.BigEndian.AppendUint32(buf, o.v.Uint32(r))
		case opUint64:
			buf = binary.BigEndian.AppendUint64(buf, o.v.Uint64(r))
		case opTime:
			buf = binary.BigEndian.AppendUint32(buf, antreawire.UnixSeconds(o.v.Time(r)))
		case opIPv4, opIPv6:
			a, err := o.addr(r)
			if err != nil {
				return buf[:n], err
			}
			var b [16]byte // none: the zero address
			if a.IsValid() {
				b = a.As16() // an IPv4 address in its last 4 bytes (::ffff:a.b.c.d)
			}
			if o.kind == opIPv4 {
				buf = append(buf, b[12:]...)
			} else {
				buf = append(buf, b[:]...)
			}
		case opUUID:
			var b [16]byte
			o.putUUID(r, b[:])
			buf = append(buf, b[:]...)
		default:
			var s string
			switch o.kind {
			case opString:
				s = o.v.String(r)
			default:
				var err error
				if s, err = o.text(r); err != nil {
					return buf[:n], err
				}
			}
			if len(s) < 255 {
				buf = append(buf, byte(len(s)))
			} else if len(s) <= maxString {
				buf = append(buf, 255, byte(len(s)>>8), byte(len(s)))
			} else {
				return buf[:n], o.tooLong(s)
			}
			buf = append(buf, s...)
		}
	}
	return buf, nil
}

// set writes the IE's value for r into its go-ipfix element e. It fails with
// an error naming the IE when the value cannot be represented (a string over
// 65535 bytes, an address of the other family).
func (o *op) set(r *flowrecord.Record, e entities.InfoElementWithValue) error {
	switch o.kind {
	case opUint8:
		e.SetUnsigned8Value(o.v.Uint8(r))
	case opUint16:
		e.SetUnsigned16Value(o.v.Uint16(r))
	case opUint32:
		e.SetUnsigned32Value(o.v.Uint32(r))
	case opUint64:
		e.SetUnsigned64Value(o.v.Uint64(r))
	case opTime:
		e.SetUnsigned32Value(antreawire.UnixSeconds(o.v.Time(r)))
	case opIPv4, opIPv6:
		if err := o.putAddr(r, o.scratch); err != nil {
			return err
		}
		e.SetIPAddressValue(o.scratch)
	case opUUID:
		o.putUUID(r, o.scratch)
		e.SetOctetArrayValue(o.scratch)
	default:
		s, err := o.text(r)
		if err != nil {
			return err
		}
		e.SetStringValue(s)
	}
	return nil
}

// maxString is the longest value an IPFIX variable-length field can hold.
const maxString = math.MaxUint16

// ParseUUID parses the canonical 8-4-4-4-12 hex form into dst (16 bytes).
func ParseUUID(s string, dst []byte) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	j := 0
	for i := 0; i < len(s); {
		if s[i] == '-' {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[j] = hi<<4 | lo
		j++
		i += 2
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
