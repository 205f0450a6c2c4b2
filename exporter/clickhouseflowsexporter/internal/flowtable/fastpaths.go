//go:build !flowtel_safe

package flowtable

// driverFastPath: AppendTo points clickhouse-go's column buffers at the
// block's own (block.go), through the driver's unexported field, when its
// columns have the layout this version is known to have. Building with the
// flowtel_safe tag turns it off: the block is copied through the driver's
// public Append.
const driverFastPath = true
