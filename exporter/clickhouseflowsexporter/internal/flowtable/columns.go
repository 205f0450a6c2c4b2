// Package flowtable is the ClickHouse `flows` table the clickhouse_flows
// exporter writes: its columns (Antrea's 51 plus flowtel's own, taken from
// the field catalogue of internal/flowrecord/catalogue), the DDL that creates it on
// every ClickHouse version from 18.16 on, and the column-oriented block that
// one INSERT sends.
package flowtable

import (
	"fmt"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// kind is the Go representation of a column's values in a Block, chosen by
// the column's type and the kind of the value it holds.
type kind uint8

const (
	kindTime   kind = iota // DateTime, carried as Unix seconds
	kindUInt8              // UInt8, from a number or an enumeration
	kindUInt16             // UInt16
	kindUInt64             // UInt64
	kindString             // String
	kindName               // String: an enumeration's name
	kindAddr               // String: an address in textual form
	kindLabels             // String: Pod labels as JSON
)

// Row is what one table row is made from: the record and the cluster UUID
// chosen for it (configured, or its resource's k8s.cluster.uid).
type Row struct {
	Record      *flowrecord.Record
	ClusterUUID string
}

// Column is one column the exporter writes.
type Column struct {
	Name string
	// Type is the ClickHouse type used when the exporter creates the table.
	Type string
	// Flowtel marks the columns flowtel appends after Antrea's.
	Flowtel bool

	attr, doc string // the catalogue's, for the documentation
	kind      kind
	value     catalogue.Value
	ref       catalogue.Ref // the field the column carries as it is, the zero Ref if none
}

// Columns lists the inserted columns in INSERT order: Antrea's 51 in the order
// of Antrea's table, then flowtel's, as the field catalogue places them. The
// Antrea table also has timeInserted (DEFAULT now()) and trusted (DEFAULT 0),
// which are never inserted.
var Columns = mustColumns(catalogue.ClickHouseColumns())

func mustColumns(cs []catalogue.Column) []Column {
	out := make([]Column, len(cs))
	for i, c := range cs {
		k, err := kindOf(c)
		if err != nil {
			panic(err) // the catalogue is fixed at build time; a test builds it
		}
		out[i] = Column{Name: c.Name, Type: c.Type.String(), Flowtel: c.Antrea == 0, attr: c.Attribute, doc: c.Doc, kind: k, value: c.Value, ref: c.Ref}
	}
	return out
}

// kindKey is a column's type and the kind of the value it holds.
type kindKey struct {
	col catalogue.ColumnType
	val catalogue.Kind
}

// kinds says how a column is filled, by its kindKey.
var kinds = map[kindKey]kind{
	{catalogue.DateTime, catalogue.KindTime}:   kindTime,
	{catalogue.UInt8, catalogue.KindUint8}:     kindUInt8,
	{catalogue.UInt8, catalogue.KindEnum}:      kindUInt8,
	{catalogue.UInt16, catalogue.KindUint16}:   kindUInt16,
	{catalogue.UInt64, catalogue.KindUint64}:   kindUInt64,
	{catalogue.CHString, catalogue.KindString}: kindString,
	{catalogue.CHString, catalogue.KindEnum}:   kindName,
	{catalogue.CHString, catalogue.KindAddr}:   kindAddr,
	{catalogue.CHString, catalogue.KindLabels}: kindLabels,
}

// kindOf chooses how a column is filled from its type and its value's kind.
func kindOf(c catalogue.Column) (kind, error) {
	if k, ok := kinds[kindKey{c.Type, c.Value.Kind}]; ok {
		return k, nil
	}
	return 0, fmt.Errorf("column %s: no way to write a %s value as %s", c.Name, c.Value.Kind, c.Type)
}
