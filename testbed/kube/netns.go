package kube

import (
	"context"
	"io"
	"net"
	"sync"

	"github.com/flowtel/flowtel/testbed/netnsjoin"
)

// Dialer dials from inside the network namespace at path: how the test
// process, in its own namespace, reaches the cluster's API server and Pods
// without an address outside the namespaces the cluster created.
func Dialer(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return netnsjoin.DialContext(ctx, path, network, addr)
	}
}

// Relay listens on addr inside the network namespace at path and relays
// every connection to target, dialled from the test's own namespace: how
// Pods reach a server the test runs on its loopback (ClickHouse). It stops
// when the returned function is called.
func Relay(path, addr, target string) (stop func(), err error) {
	var ln net.Listener
	if err := netnsjoin.Do(path, func() (err error) {
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
