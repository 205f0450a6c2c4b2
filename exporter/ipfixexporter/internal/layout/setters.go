package layout

import (
	"fmt"
	"math"
	"net"
	"net/netip"

	"github.com/vmware/go-ipfix/pkg/entities"

	"github.com/flowtel/flowtel/internal/antreawire"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// setter writes one IE's value for r into ie. It fails with an error naming the
// IE when the value cannot be represented (a string over 65535 bytes, an address
// of the other family).
type setter func(r *flowrecord.Record, ie entities.InfoElementWithValue) error

// newSetter returns the setter of an IE of the field catalogue in a template
// of the given family, chosen by the IE's type and the kind of the value it
// carries; the values follow what Antrea writes. Setters own scratch buffers
// (addresses, UUIDs) and caches of the texts they wrote, so they encode
// without allocating.
func newSetter(ie flowrecord.IE, ipv6 bool) (setter, error) {
	name, v := ie.Name, ie.Value
	switch k := v.Kind; {
	case ie.Type == flowrecord.Unsigned8 && (k == flowrecord.KindUint8 || k == flowrecord.KindEnum):
		return func(r *flowrecord.Record, e entities.InfoElementWithValue) error {
			e.SetUnsigned8Value(v.Uint8(r))
			return nil
		}, nil
	case ie.Type == flowrecord.Unsigned16 && k == flowrecord.KindUint16:
		return func(r *flowrecord.Record, e entities.InfoElementWithValue) error {
			e.SetUnsigned16Value(v.Uint16(r))
			return nil
		}, nil
	case ie.Type == flowrecord.Unsigned32 && k == flowrecord.KindUint32:
		return func(r *flowrecord.Record, e entities.InfoElementWithValue) error {
			e.SetUnsigned32Value(v.Uint32(r))
			return nil
		}, nil
	case ie.Type == flowrecord.Unsigned64 && k == flowrecord.KindUint64:
		return func(r *flowrecord.Record, e entities.InfoElementWithValue) error {
			e.SetUnsigned64Value(v.Uint64(r))
			return nil
		}, nil
	case ie.Type == flowrecord.DateTimeSeconds && k == flowrecord.KindTime:
		// 0 for an unknown time.
		return func(r *flowrecord.Record, e entities.InfoElementWithValue) error {
			e.SetUnsigned32Value(antreawire.UnixSeconds(v.Time(r)))
			return nil
		}, nil
	case ie.Type == flowrecord.String && k == flowrecord.KindString:
		return func(r *flowrecord.Record, e entities.InfoElementWithValue) error {
			return setString(name, e, v.String(r))
		}, nil
	case ie.Type == flowrecord.String && k == flowrecord.KindLabels:
		// Pod labels as Antrea writes them: a JSON object (encoding/json's
		// rendering of the map), "{}" for a Pod without labels, "" when
		// labels were not collected.
		texts := &antreawire.Texts{}
		return func(r *flowrecord.Record, e entities.InfoElementWithValue) error {
			return setString(name, e, texts.Labels(v.Labels(r)))
		}, nil
	case ie.Type == flowrecord.String && k == flowrecord.KindAddr:
		// Antrea sends the Egress IP as text, "" when there is none.
		texts := &antreawire.Texts{}
		return func(r *flowrecord.Record, e entities.InfoElementWithValue) error {
			return setString(name, e, texts.Addr(v.Addr(r).Unmap()))
		}, nil
	case (ie.Type == flowrecord.IPv4Address || ie.Type == flowrecord.IPv6Address) && k == flowrecord.KindAddr:
		return addr(name, ie.Type == flowrecord.IPv6Address, ipv6, v.Addr), nil
	case ie.Type == flowrecord.OctetArray && k == flowrecord.KindString:
		return uuid(v.String), nil
	}
	return nil, fmt.Errorf("IE %s: no way to write a %s value as %s", name, v.Kind, ie.Type)
}

// maxString is the longest value an IPFIX variable-length field can hold.
const maxString = math.MaxUint16

func setString(name string, ie entities.InfoElementWithValue, s string) error {
	if len(s) > maxString {
		return fmt.Errorf("IE %s: value of %d bytes exceeds the IPFIX variable-length limit of %d bytes", name, len(s), maxString)
	}
	ie.SetStringValue(s)
	return nil
}

// addr writes an address of the IE's family; the zero address (0.0.0.0 or ::)
// stands for "none", as in Antrea. An address of the other family fails the
// record: the IEs of a template are of its family (chosen by the source
// address), but for the proxy exporter's pair, whose values are of their IE's
// family or none.
func addr(name string, ie6, template6 bool, get func(*flowrecord.Record) netip.Addr) setter {
	buf := make(net.IP, net.IPv4len)
	if ie6 {
		buf = make(net.IP, net.IPv6len)
	}
	return func(r *flowrecord.Record, ie entities.InfoElementWithValue) error {
		a := get(r).Unmap()
		switch {
		case !a.IsValid():
			clear(buf)
		case a.Is4() && !ie6:
			b := a.As4()
			copy(buf, b[:])
		case a.Is6() && ie6:
			b := a.As16()
			copy(buf, b[:])
		default:
			return fmt.Errorf("IE %s: address %s is not of the template's family (IPv6=%t, chosen by the source address)", name, a, template6)
		}
		ie.SetIPAddressValue(buf)
		return nil
	}
}

// uuid writes a Kubernetes UID as 16 raw bytes; an empty or unparsable UID is
// the nil UUID, as in Antrea.
func uuid(get func(*flowrecord.Record) string) setter {
	buf := make([]byte, 16)
	return func(r *flowrecord.Record, ie entities.InfoElementWithValue) error {
		if !ParseUUID(get(r), buf) {
			clear(buf)
		}
		ie.SetOctetArrayValue(buf)
		return nil
	}
}

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
