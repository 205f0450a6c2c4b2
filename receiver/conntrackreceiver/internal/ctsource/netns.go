// Package ctsource reads a kernel conntrack table over netlink, in this or in
// another network namespace: dumps by zone, DESTROY events, the sysctls that
// make counters and timestamps available, the table's size limit and the
// namespace's own addresses.
package ctsource

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Namespace is a network namespace given by a path such as /var/run/netns/X
// or /proc/<pid>/ns/net; the zero Namespace is the receiver's own.
type Namespace struct {
	path string
	f    *os.File
}

// OpenNamespace opens the namespace at path ("" = the current one). The error
// says what is wrong with the path and how to fix it.
func OpenNamespace(path string) (*Namespace, error) {
	if path == "" {
		return &Namespace{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return nil, fmt.Errorf("netns: cannot open it: %w (got %q); create it with `ip netns add`, or point netns at /proc/<pid>/ns/net of a process in the namespace", err, path)
	}
	t, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	if err != nil || t != unix.CLONE_NEWNET {
		f.Close()
		return nil, fmt.Errorf("netns: not a network namespace file (got %q); use a path such as /var/run/netns/<name> or /proc/<pid>/ns/net", path)
	}
	return &Namespace{path: path, f: f}, nil
}

// Path is the namespace's path, "" for the current namespace.
func (n *Namespace) Path() string { return n.path }

// FD is the namespace file's descriptor, -1 for the current namespace; netlink
// sockets are opened in it through netlink.Config.NetNS.
func (n *Namespace) FD() int {
	if n.f == nil {
		return -1
	}
	return int(n.f.Fd())
}

// Close releases the namespace file.
func (n *Namespace) Close() error {
	if n.f == nil {
		return nil
	}
	return n.f.Close()
}

// Do runs fn inside the namespace. fn runs on a goroutine of its own whose OS
// thread joins the namespace and is never handed back to the scheduler (the
// runtime ends a thread still locked when its goroutine exits), so no other
// goroutine ever runs in the wrong namespace.
func (n *Namespace) Do(fn func() error) error {
	if n.f == nil {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Deliberately no UnlockOSThread: the thread dies with the goroutine.
		if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netns: cannot enter the namespace: %w (got %q); run the collector as root, or with CAP_SYS_ADMIN", err, n.path)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// ErrNoPermission says the process may not use conntrack in the namespace.
var ErrNoPermission = errors.New("no permission to use conntrack")
