package kube

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// inNetNS runs fn on an OS thread that has joined the network namespace at
// path. Sockets fn creates belong to that namespace for their whole life, on
// whichever thread later uses them. The thread goes back to its own namespace
// before it is handed back to the Go scheduler. It must not simply exit
// instead: a child started from it with Pdeathsig (every daemon of the
// bed) would be killed with it, since the signal follows the parent thread.
func inNetNS(path string, fn func() error) error {
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

// Dialer dials from inside the network namespace at path: how the test
// process, in its own namespace, reaches the cluster's API server and Pods
// without an address outside the namespaces the cluster created.
func Dialer(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNetNS(path, func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// Relay listens on addr inside the network namespace at path and relays
// every connection to target, dialled from the test's own namespace: how
// Pods reach a server the test runs on its loopback (ClickHouse). It stops
// when the returned function is called.
func Relay(path, addr, target string) (stop func(), err error) {
	var ln net.Listener
	if err := inNetNS(path, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := net.Dial("tcp", target)
				if err != nil {
					in.Close()
					return
				}
				track(in, true)
				track(out, true)
				done := make(chan struct{}, 2)
				pipe := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					if tc, ok := dst.(*net.TCPConn); ok {
						_ = tc.CloseWrite()
					}
					done <- struct{}{}
				}
				go pipe(out, in)
				go pipe(in, out)
				<-done
				<-done
				in.Close()
				out.Close()
				track(in, false)
				track(out, false)
			}()
		}
	}()
	return func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}, nil
}
