package antreaflowsreceiver

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// A setter stores the value of one IE into a Record, or says why the value
// does not fit the IE.
type setter func(r *flowrecord.Record, v []byte) error

// Enterprise numbers of the IEs the agents send.
const (
	entIANA    = catalogue.EnterpriseIANA
	entReverse = catalogue.EnterpriseIANAReverse
	entAntrea  = catalogue.EnterpriseAntrea
)

type ieID struct {
	enterprise uint32
	id         uint16
}

// setterFor returns how to store the IE, nil for one the receiver does not
// read (skipped, as Antrea's Flow Aggregator skips IEs it does not know).
func setterFor(enterprise uint32, id uint16) setter { return setters[ieID{enterprise, id}] }

// setters are the IEs of the field catalogue the receiver reads, by
// enterprise and ID, each storing into its field through the IE's Ref: every
// IE carrying its field's Ref outside the Aggregation (agents send no
// aggregation) whose type reads into its field's kind. Not read: the
// 16-byte UUID IEs (octetArray; the agents' policy UIDs come as strings, the
// catalogue's inbound IEs), the Pod labels (a JSON string) and the IEs with
// a value of their own (flowDirection, the original exporter's address).
var setters = catalogueSetters()

func catalogueSetters() map[ieID]setter {
	out := map[ieID]setter{}
	for _, f := range catalogue.Fields() {
		for _, ie := range f.IPFIX {
			if ie.Ref.Kind == catalogue.KindNone || ie.Ref.Aggregation {
				continue
			}
			if set := setterOf(ie); set != nil {
				out[ieID{ie.Enterprise, ie.ID}] = set
			}
		}
	}
	return out
}

// setterOf is how the IE's value is stored in its field, nil when the
// receiver does not read it.
func setterOf(ie catalogue.IE) setter {
	ref := ie.Ref
	switch k := ref.Kind; {
	case ie.Type == catalogue.Unsigned8 && (k == catalogue.KindUint8 || k == catalogue.KindEnum):
		return unsignedField(func(r *flowrecord.Record) *uint8 { return ref.At(r).Uint8() })
	case ie.Type == catalogue.Unsigned16 && k == catalogue.KindUint16:
		return unsignedField(func(r *flowrecord.Record) *uint16 { return ref.At(r).Uint16() })
	case ie.Type == catalogue.Unsigned32 && k == catalogue.KindUint32:
		return unsignedField(func(r *flowrecord.Record) *uint32 { return ref.At(r).Uint32() })
	case ie.Type == catalogue.Unsigned64 && k == catalogue.KindUint64:
		return unsignedField(func(r *flowrecord.Record) *uint64 { return ref.At(r).Uint64() })
	case ie.Type == catalogue.DateTimeSeconds && k == catalogue.KindTime:
		return seconds(func(r *flowrecord.Record) *time.Time { return ref.At(r).Time() })
	case ie.Type == catalogue.String && k == catalogue.KindString:
		return str(func(r *flowrecord.Record) *string { return ref.At(r).String() })
	case ie.Type == catalogue.String && k == catalogue.KindAddr: // egressIP, as text
		return textAddr(func(r *flowrecord.Record) *netip.Addr { return ref.At(r).Addr() })
	case (ie.Type == catalogue.IPv4Address || ie.Type == catalogue.IPv6Address) && k == catalogue.KindAddr:
		n := 4
		if ie.Type == catalogue.IPv6Address {
			n = 16
		}
		set := addr(n, func(r *flowrecord.Record) *netip.Addr { return ref.At(r).Addr() })
		if !ie.Fallback {
			return set
		}
		return func(r *flowrecord.Record, v []byte) error {
			if ref.At(r).Addr().IsValid() {
				return addrLen(v, n) // set by the IE it stands in for
			}
			return set(r, v)
		}
	}
	return nil
}

// unsigned reads an unsigned integer of any length up to 8 bytes (IPFIX
// allows reduced-size encoding) that must fit in max.
func unsigned(v []byte, max uint64) (uint64, error) {
	if len(v) > 8 {
		return 0, fmt.Errorf("%d bytes, longer than an unsigned64", len(v))
	}
	var n uint64
	for _, c := range v {
		n = n<<8 | uint64(c)
	}
	if n > max {
		return 0, fmt.Errorf("value %d, over %d", n, max)
	}
	return n, nil
}

// unsignedField stores an unsigned IE of any length up to 8 bytes into a
// field of type T, refusing a value over T's maximum.
func unsignedField[T uint8 | uint16 | uint32 | uint64](get func(*flowrecord.Record) *T) setter {
	limit := uint64(^T(0))
	return func(r *flowrecord.Record, v []byte) error {
		n, err := unsigned(v, limit)
		*get(r) = T(n)
		return err
	}
}

func seconds(get func(*flowrecord.Record) *time.Time) setter {
	return func(r *flowrecord.Record, v []byte) error {
		if len(v) != 4 {
			return fmt.Errorf("%d bytes, not a dateTimeSeconds (4)", len(v))
		}
		if s := binary.BigEndian.Uint32(v); s != 0 {
			*get(r) = time.Unix(int64(s), 0)
		}
		return nil
	}
}

func str(get func(*flowrecord.Record) *string) setter {
	return func(r *flowrecord.Record, v []byte) error {
		*get(r) = string(v)
		return nil
	}
}

// addr reads an address of n bytes; the unspecified address is "not set",
// as the agents write zeros for an absent one.
func addr(n int, get func(*flowrecord.Record) *netip.Addr) setter {
	return func(r *flowrecord.Record, v []byte) error {
		if err := addrLen(v, n); err != nil {
			return err
		}
		a, _ := netip.AddrFromSlice(v)
		if !a.IsUnspecified() {
			*get(r) = a
		}
		return nil
	}
}

func addrLen(v []byte, n int) error {
	if len(v) != n {
		return fmt.Errorf("%d bytes, not an IPv%d address", len(v), map[int]int{4: 4, 16: 6}[n])
	}
	return nil
}

// textAddr reads an address the agents send as text (egressIP); empty is not set.
func textAddr(get func(*flowrecord.Record) *netip.Addr) setter {
	return func(r *flowrecord.Record, v []byte) error {
		if len(v) == 0 {
			return nil
		}
		a, err := netip.ParseAddr(string(v))
		if err != nil {
			return fmt.Errorf("%q, not an address", v)
		}
		*get(r) = a
		return nil
	}
}
