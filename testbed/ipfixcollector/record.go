package ipfixcollector

import "strings"

// Record is one data record as the go-ipfix collector decoded it.
type Record struct {
	ExportTime  uint32 `json:"exportTime"`
	ObsDomainID uint32 `json:"obsDomainID"`
	TemplateID  uint16 `json:"templateID"`
	RecordIdx   int32  `json:"recordIdx"`
	SequenceNum uint32 `json:"sequenceNumber"`
	// Data is the collector's text rendering: one "name: value" line per IE.
	Data string `json:"data"`

	// Names are the IE names in the order the collector listed them (the
	// template's order).
	Names []string `json:"-"`
	// Fields are the IE values as the collector printed them: numbers in
	// decimal, addresses in text, octet arrays in hex, strings as they are.
	Fields map[string]string `json:"-"`
}

// parse splits Data into Names and Fields. An IE with an empty value is
// printed as "name:" (no space after the colon).
func (r *Record) parse() {
	r.Names, r.Fields = nil, map[string]string{}
	for _, line := range strings.Split(r.Data, "\n") {
		line = strings.TrimSpace(line)
		name, value, ok := strings.Cut(line, ": ")
		if !ok {
			name, ok = strings.CutSuffix(line, ":")
		}
		if ok && name != "" {
			r.Names = append(r.Names, name)
			r.Fields[name] = strings.TrimSpace(value)
		}
	}
}
