package ctsource

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The per-namespace sysctls the receiver needs: packet/byte counters and
// start/stop timestamps in conntrack entries, and the table's size limit.
const (
	sysctlAcct      = "/proc/sys/net/netfilter/nf_conntrack_acct"
	sysctlTimestamp = "/proc/sys/net/netfilter/nf_conntrack_timestamp"
	sysctlMax       = "/proc/sys/net/netfilter/nf_conntrack_max"
)

// EnableAccounting sets nf_conntrack_acct and nf_conntrack_timestamp to 1 in
// the namespace. It returns one error per sysctl it could not set (already 1
// counts as set); the caller says so once and carries on.
func EnableAccounting(ns *Namespace) []error {
	var errs []error
	_ = ns.Do(func() error {
		for _, p := range []string{sysctlAcct, sysctlTimestamp} {
			v, err := readSysctl(p)
			if err == nil && v == "1" {
				continue
			}
			if err := os.WriteFile(p, []byte("1"), 0); err != nil {
				errs = append(errs, fmt.Errorf("%s: cannot set it to 1: %w (got %q); give the collector a writable /proc/sys in the namespace, or set it to 1 there beforehand", sysctlName(p), err, v))
			}
		}
		return nil
	})
	return errs
}

// TableMax reads nf_conntrack_max in the namespace.
func TableMax(ns *Namespace) (int64, error) {
	var n int64
	err := ns.Do(func() error {
		v, err := readSysctl(sysctlMax)
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

func sysctlName(p string) string {
	return strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", ".")
}
