// Package netnsjoin runs code, and dials, from inside a network namespace
// given by its path (/run/netns/<name>, /proc/<pid>/ns/net): how the testbed's
// harnesses (the kube bed, the IPFIX collector) reach addresses that exist only
// in the namespaces they created, without an address outside them.
package netnsjoin

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread that has joined the network namespace at
// path. Sockets fn creates belong to that namespace for their whole life, on
// whichever thread later uses them. The thread goes back to its own namespace
// before it is handed back to the Go scheduler. It must not simply exit
// instead: a child started from it with Pdeathsig (every daemon of the
// bed) would be killed with it, since the signal follows the parent thread.
func Do(path string, fn func() error) error {
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer self.Close()
	target, err := os.Open(path)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("joining network namespace %s: %w", path, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// Stuck in the other namespace: keep the thread locked, so it
		// ends with this goroutine's caller rather than serve another.
		return fmt.Errorf("returning from network namespace %s: %w", path, err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

// DialContext dials from inside the network namespace at path; the
// connection stays in that namespace.
func DialContext(ctx context.Context, path, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := Do(path, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
