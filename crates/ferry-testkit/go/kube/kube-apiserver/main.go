// The Kubernetes API server for ferry's Kubernetes HA tests, built from the
// pinned k8s.io/kubernetes module (no kubelet: ferry processes play the pods).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
