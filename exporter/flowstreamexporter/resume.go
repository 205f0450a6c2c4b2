package flowstreamexporter

import (
	"crypto/rand"
	"encoding/hex"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// A stream position on the wire is a ResumeToken: the ring's epoch and the
// sequence number of the last record accounted for, which is the cursor
// before the next record to read, minus one (-1 before the first record the
// ring ever held).

// newEpoch names a ring. Sequence numbers restart at 0 with every ring, so a
// token is only meaningful to the ring that issued it: the epoch is random,
// never reused by a restarted server.
func newEpoch() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// token is the resume token of cursor: the records before it are accounted for.
func (r *ring) token(cursor uint64) *pb.ResumeToken {
	return &pb.ResumeToken{StreamEpoch: r.epoch, SequenceNumber: int64(cursor) - 1}
}

// start is where a stream that sent tok (nil: none) begins reading, and
// whether the token was from another epoch: then the stream starts at the
// oldest record, as a new one. A same-epoch token for a record this ring has
// not written is INVALID_ARGUMENT. A token for a record already overwritten is
// valid: the stream's first read counts what it lost in dropped_count.
func (r *ring) start(tok *pb.ResumeToken) (cursor uint64, reset bool, err error) {
	if tok == nil {
		return r.oldest(), false, nil
	}
	if tok.GetStreamEpoch() != r.epoch {
		return r.oldest(), true, nil
	}
	next := r.written()
	if seq := tok.GetSequenceNumber(); seq < -1 || seq >= int64(next) {
		return 0, false, status.Errorf(codes.InvalidArgument,
			"resume.sequence_number: %d is at or beyond this stream's position (%d records written in epoch %s); send the resume_token of a response unchanged",
			seq, next, r.epoch)
	}
	return uint64(tok.GetSequenceNumber() + 1), false, nil
}
