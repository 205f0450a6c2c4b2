package layout

import (
	"encoding/hex"
	"slices"
	"strconv"
	"time"

	"github.com/vmware/go-ipfix/pkg/entities"

	"github.com/flowtel/flowtel/internal/antreawire"
)

// jsonOrder sorts the elements by name: Antrea's JSON records are a Go map
// marshalled by encoding/json, whose keys come out sorted.
func jsonOrder(elems []entities.InfoElementWithValue) []int {
	order := make([]int, len(elems))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		na, nb := elems[a].GetInfoElement().Name, elems[b].GetInfoElement().Name
		switch {
		case na < nb:
			return -1
		case na > nb:
			return 1
		}
		return 0
	})
	return order
}

// AppendJSON appends the filled record as one newline-terminated JSON object,
// in the shape of Antrea's JSON record format:
//
//	{"@timestamp":"<RFC 3339 export time>","ipfix":{"<IE name>":<value>,...}}
//
// Integers are numbers, addresses and strings are strings. Antrea cannot encode
// UUID IEs (octetArray) as JSON; here they are canonical UUID strings.
func (t *Template) AppendJSON(buf []byte, now time.Time) []byte {
	buf = append(buf, `{"@timestamp":"`...)
	buf = now.AppendFormat(buf, time.RFC3339)
	buf = append(buf, `","ipfix":{`...)
	for n, i := range t.jsonOrder {
		e := t.elements[i]
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = antreawire.AppendJSONString(buf, e.GetInfoElement().Name)
		buf = append(buf, ':')
		switch e.GetDataType() {
		case entities.Unsigned8:
			buf = strconv.AppendUint(buf, uint64(e.GetUnsigned8Value()), 10)
		case entities.Unsigned16:
			buf = strconv.AppendUint(buf, uint64(e.GetUnsigned16Value()), 10)
		case entities.Unsigned32, entities.DateTimeSeconds:
			buf = strconv.AppendUint(buf, uint64(e.GetUnsigned32Value()), 10)
		case entities.Unsigned64:
			buf = strconv.AppendUint(buf, e.GetUnsigned64Value(), 10)
		case entities.Ipv4Address, entities.Ipv6Address:
			buf = append(buf, '"')
			buf = append(buf, e.GetIPAddressValue().String()...)
			buf = append(buf, '"')
		case entities.String:
			buf = antreawire.AppendJSONString(buf, e.GetStringValue())
		case entities.OctetArray:
			buf = appendUUID(buf, e.GetOctetArrayValue())
		default:
			// The layouts use none of the other types.
			buf = append(buf, "null"...)
		}
	}
	return append(buf, "}}\n"...)
}

func appendUUID(buf, b []byte) []byte {
	if len(b) != 16 {
		return antreawire.AppendJSONString(buf, hex.EncodeToString(b))
	}
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	buf = append(buf, '"')
	buf = append(buf, s[:]...)
	return append(buf, '"')
}
