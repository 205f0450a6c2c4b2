// Command pause is the testbed's Pod sandbox process: the first process of
// each Pod, holding its namespaces while the Pod's containers come and go.
// As PID 1 of a Pod that shares its PID namespace it is the parent of
// orphaned processes, so it reaps them (else they stay zombies). It exits on
// SIGTERM or SIGINT: the kernel delivers no signal to a PID 1 that has no
// handler for it, so without one the sandbox would wait to be killed.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	reap() // children that exited before the handler was installed
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child: SIGCHLDs that arrive together are
// delivered once.
func reap() {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
