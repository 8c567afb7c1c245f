// Command pause is the lab's Kubernetes sandbox ("pause") container: it holds a pod's namespaces and
// does nothing until it is told to stop. hack/build-kube-images.sh builds it statically into an image
// FROM scratch tagged as kubeadm's pause image, since no registry is reachable from the lab.
//
// Like the upstream pause it exits 0 on SIGINT or SIGTERM. As PID 1 of its pod's PID namespace
// (when the pod shares one) it also reaps orphaned children.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (hactl lab)")
		return
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-children:
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
