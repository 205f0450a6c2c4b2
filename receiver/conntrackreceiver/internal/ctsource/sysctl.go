package ctsource

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The per-namespace sysctls the receiver needs, relative to the net sysctl
// directory (/proc/sys/net): packet/byte counters and start/stop timestamps
// in conntrack entries, and the table's size limit.
const (
	sysctlAcct      = "netfilter/nf_conntrack_acct"
	sysctlTimestamp = "netfilter/nf_conntrack_timestamp"
	sysctlMax       = "netfilter/nf_conntrack_max"
)

// Accounting is what EnableAccounting or CheckAccounting found or did: for
// each sysctl whether it is on, and whether this call turned it on.
type Accounting struct {
	// AcctOn and TimestampOn: nf_conntrack_acct / nf_conntrack_timestamp are 1.
	AcctOn, TimestampOn bool
	// Enabled lists the sysctls this call set from 0 to 1, by name.
	Enabled []string
}

// EnableAccounting sets nf_conntrack_acct and nf_conntrack_timestamp to 1 in
// the namespace, under dir (the net sysctl directory the reading thread sees
// as its namespace's: /proc/sys/net or a mount of it; what a name under it
// holds follows the namespace of the thread that opens it). It returns one
// error per sysctl it could not set (already 1 counts as set); the caller
// says so once and carries on.
func EnableAccounting(ns *Namespace, dir string) (Accounting, []error) {
	return accounting(ns, dir, true)
}

// CheckAccounting reads nf_conntrack_acct and nf_conntrack_timestamp in the
// namespace, under dir, and changes nothing.
func CheckAccounting(ns *Namespace, dir string) (Accounting, []error) {
	return accounting(ns, dir, false)
}

func accounting(ns *Namespace, dir string, set bool) (Accounting, []error) {
	var a Accounting
	var errs []error
	_ = ns.Do(func() error {
		for _, s := range []struct {
			name string
			on   *bool
		}{{sysctlAcct, &a.AcctOn}, {sysctlTimestamp, &a.TimestampOn}} {
			p := filepath.Join(dir, s.name)
			v, err := readSysctl(p)
			switch {
			case err == nil && v == "1":
				*s.on = true
				continue
			case !set && err != nil:
				errs = append(errs, fmt.Errorf("%s: cannot read it: %w", sysctlName(s.name), err))
				continue
			case !set:
				continue
			}
			if err := os.WriteFile(p, []byte("1"), 0); err != nil {
				errs = append(errs, fmt.Errorf("%s: cannot set it to 1 at %s: %w (got %q); give the collector a writable mount of the namespace's /proc/sys/net and name it in sysctl_path, or set it to 1 there beforehand", sysctlName(s.name), p, err, v))
				continue
			}
			*s.on = true
			a.Enabled = append(a.Enabled, sysctlName(s.name))
		}
		return nil
	})
	return a, errs
}

// TableMax reads nf_conntrack_max in the namespace, under dir.
func TableMax(ns *Namespace, dir string) (int64, error) {
	var n int64
	err := ns.Do(func() error {
		v, err := readSysctl(filepath.Join(dir, sysctlMax))
		if err != nil {
			return err
		}
		n, err = strconv.ParseInt(v, 10, 64)
		return err
	})
	return n, err
}

func readSysctl(p string) (string, error) {
	b, err := os.ReadFile(p)
	return strings.TrimSpace(string(b)), err
}

// sysctlName is the sysctl's dotted name (net.netfilter.nf_conntrack_acct).
func sysctlName(rel string) string {
	return "net." + strings.ReplaceAll(rel, "/", ".")
}

// SysctlInts reads integer sysctls, each a path relative to dir (such as
// "netfilter/nf_conntrack_udp_timeout"), in the namespace; ok[i] is false
// for one that is missing or not an integer.
func SysctlInts(ns *Namespace, dir string, rels ...string) (vals []int64, ok []bool) {
	vals, ok = make([]int64, len(rels)), make([]bool, len(rels))
	_ = ns.Do(func() error {
		for i, rel := range rels {
			v, err := readSysctl(filepath.Join(dir, rel))
			if err == nil {
				vals[i], err = strconv.ParseInt(v, 10, 64)
			}
			ok[i] = err == nil
		}
		return nil
	})
	return vals, ok
}
