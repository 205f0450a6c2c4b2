package conntrackreceiver

import (
	"context"
	"errors"
	"strings"

	"go.uber.org/zap"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
)

// setUpAccounting turns conntrack accounting and timestamps on in the
// namespace (enable_accounting), or only checks them, and says what it found
// in the log. Entries created while they were off never get counters or a
// start time (the kernel adds them to an entry when it creates it); their
// records are counted in receiver_conntrack_records_incomplete.
func (r *conntrackReceiver) setUpAccounting() {
	var acct ctsource.Accounting
	var errs []error
	if r.cfg.EnableAccounting {
		acct, errs = ctsource.EnableAccounting(r.ns, r.cfg.SysctlPath)
	} else {
		acct, errs = ctsource.CheckAccounting(r.ns, r.cfg.SysctlPath)
	}
	netns := zap.String("netns", r.cfg.NetNS)
	if len(errs) > 0 {
		r.tel.ReceiverConntrackNetlinkErrors.Add(context.Background(), 1, failedSysctl)
		r.logger.Warn("could not enable conntrack accounting/timestamps; records may lack counters or start times (counted in receiver_conntrack_records_incomplete)",
			netns, zap.Error(errors.Join(errs...)))
		return
	}
	switch {
	case len(acct.Enabled) > 0:
		r.logger.Info("enabled conntrack accounting/timestamps in the network namespace (enable_accounting: false leaves them as they are); connections that were already open carry no counters or start times, their records are counted in receiver_conntrack_records_incomplete",
			netns, zap.String("enabled", strings.Join(acct.Enabled, ",")))
	case !acct.AcctOn || !acct.TimestampOn:
		r.logger.Warn("conntrack accounting/timestamps are off and enable_accounting is false; records lack counters or start times (counted in receiver_conntrack_records_incomplete)",
			netns, zap.Bool("nf_conntrack_acct", acct.AcctOn), zap.Bool("nf_conntrack_timestamp", acct.TimestampOn))
	default:
		r.logger.Info("conntrack accounting/timestamps already on", netns)
	}
}

// countIncomplete counts exported records whose conntrack entry had no
// counters or no start time.
func (r *conntrackReceiver) countIncomplete(ctx context.Context, noCounters, noTimestamps int64) {
	if noCounters > 0 {
		r.tel.ReceiverConntrackRecordsIncomplete.Add(ctx, noCounters, incompleteNoCounters)
	}
	if noTimestamps > 0 {
		r.tel.ReceiverConntrackRecordsIncomplete.Add(ctx, noTimestamps, incompleteNoTimestamps)
	}
}
