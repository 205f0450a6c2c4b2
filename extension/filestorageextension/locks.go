package filestorageextension

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// procRoot is where /proc is read (tests point it elsewhere).
var procRoot = "/proc"

// lockHolder is a process holding a lock on a file, as /proc/locks lists it.
type lockHolder struct {
	pid    int    // in this process's PID namespace; 0 when it is not visible from it
	self   bool   // this process
	cmd    string // its command line, when visible
	cgroup string // its cgroup (v2 path, or the v1 lines), when visible
	note   string // what its holderNote says of it (its Pod), when it wrote one
}

// fileID is a file as /proc/locks names it: the device of its file system
// (major and minor) and its inode.
type fileID struct {
	major, minor uint32
	ino          uint64
}

// lockedFiles lists the files of dir that hold a lock someone has taken
// (flock, POSIX or OFD), with their holders; a lock only waited for is not
// one. A file system whose stat device differs from the one /proc/locks
// shows (btrfs subvolumes) is matched on the inode alone.
func lockedFiles(dir string) (map[string][]lockHolder, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	byID := map[fileID]string{}
	byIno := map[uint64]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil {
			continue
		}
		byID[fileID{unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino}] = p
		byIno[st.Ino] = p
	}
	raw, err := os.ReadFile(filepath.Join(procRoot, "locks"))
	if err != nil {
		return nil, err
	}
	locks := parseLocks(raw)
	out := map[string][]lockHolder{}
	matched := false
	for _, l := range locks {
		if p, ok := byID[l.file]; ok {
			out[p] = append(out[p], holderOf(l.pid))
			matched = true
		}
	}
	if !matched {
		for _, l := range locks {
			if p, ok := byIno[l.file.ino]; ok {
				out[p] = append(out[p], holderOf(l.pid))
			}
		}
	}
	return out, nil
}

type procLock struct {
	pid  int
	file fileID
}

// parseLocks reads /proc/locks: "<n>: [-> ]<class> <mode> <access> <pid>
// <major>:<minor>:<inode> <start> <end>", major and minor in hex. Lines
// with "->" are waiters.
func parseLocks(raw []byte) []procLock {
	var out []procLock
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] == "->" {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil {
			continue
		}
		parts := strings.Split(f[5], ":")
		if len(parts) != 3 {
			continue
		}
		major, err1 := strconv.ParseUint(parts[0], 16, 32)
		minor, err2 := strconv.ParseUint(parts[1], 16, 32)
		ino, err3 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, procLock{pid: pid, file: fileID{uint32(major), uint32(minor), ino}})
	}
	return out
}

// holderOf describes the process pid (-1: an OFD lock, which has no owner
// process; 0: outside this PID namespace) as far as /proc shows it.
func holderOf(pid int) lockHolder {
	h := lockHolder{pid: max(pid, 0)}
	if pid <= 0 {
		return h
	}
	h.self = pid == os.Getpid()
	if b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cmdline")); err == nil {
		h.cmd = strings.TrimSpace(strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " "))
	}
	if b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup")); err == nil {
		h.cgroup = cgroupPath(string(b))
	}
	return h
}

// cgroupPath is the cgroup v2 path of a /proc/<pid>/cgroup ("0::<path>"),
// or its lines joined for cgroup v1. Under Kubernetes the path names the Pod
// (kubepods…pod<uid>) unless a cgroup namespace hides it ("/").
func cgroupPath(s string) string {
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", " ")
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// String is a lock holder for a log line.
func (h lockHolder) String() string { return fmt.Sprintf("pid %d %q", h.pid, h.cmd) }
