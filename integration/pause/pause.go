// The pod sandbox's only process, as Kubernetes' pause does it: it holds the pod's namespaces and
// waits. SIGTERM or SIGINT ends it at once (exit 0); as PID 1 of the pod's PID namespace it also
// reaps any orphan that is reparented to it. Stdlib only, built offline and static:
//
//	CGO_ENABLED=0 GOPROXY=off GO111MODULE=off go build -trimpath -o pause pause.go
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited; none is left waiting as a zombie.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
