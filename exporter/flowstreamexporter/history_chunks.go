package flowstreamexporter

import (
	"context"
	"fmt"
)

// A history is read in chunks of whole seconds of end time, each planned
// by a narrow query (chunkPlanSQL) and read by the table's primary key
// (chunkRowsSQL). Without that, ClickHouse 18.16 reads every column of
// every row in the scope to sort them, however few the client reads first:
// seconds for the first page of a week of 10M rows.
//
// The first chunk is one page, so the first page comes fast; each next one
// is chunkGrowth times larger, up to maxChunkRows, so a long history costs
// few plans.
const (
	chunkGrowth  = 8
	maxChunkRows = 20000
)

// chunk is a planned range: the rows ending from start (Unix seconds)
// until end (exclusive, 0: no bound, the last chunk), inserted between
// insertedFrom and insertedTo, rows of them.
type chunk struct {
	start, end               int64
	insertedFrom, insertedTo int64
	rows                     uint64
	last                     bool // no row ends after the chunk
}

// planChunk plans the chunk of at least want rows from lower on (whole
// seconds: up to one second's rows more), so that a chunk fills a page; a
// chunk without rows means the history is complete.
func (h *history) planChunk(ctx context.Context, where []string, lower int64, want int) (chunk, error) {
	rows, err := h.conn.Query(ctx, chunkPlanSQL(h.cfg.Database, h.cfg.Table, where, want+1))
	if err != nil {
		return chunk{}, err
	}
	defer rows.Close()
	c := chunk{start: lower, last: true}
	for rows.Next() {
		var end, from, to uint32
		var n uint64
		if err := rows.Scan(&end, &from, &to, &n); err != nil {
			return chunk{}, fmt.Errorf("planning: %w", err)
		}
		if c.rows >= uint64(want) {
			// This second starts the next chunk.
			c.end, c.last = int64(end), false
			break
		}
		if c.rows == 0 || int64(from) < c.insertedFrom {
			c.insertedFrom = int64(from)
		}
		c.insertedTo = max(c.insertedTo, int64(to))
		c.rows += n
	}
	if err := rows.Err(); err != nil {
		return chunk{}, err
	}
	return c, nil
}
