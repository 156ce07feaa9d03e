// The etcd server for ferry's Kubernetes HA tests: etcd's own entry point,
// built from the pinned module so the test kit needs no download site.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
