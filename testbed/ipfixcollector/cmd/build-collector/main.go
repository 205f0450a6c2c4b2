// Command build-collector builds (or finds in the cache) the go-ipfix collector
// the testbed decodes flowtel's IPFIX with, and prints its path. scripts/peers.sh
// runs it so that the one-time build happens before the tests, as its own step.
package main

import (
	"fmt"
	"os"

	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

func main() {
	path, err := ipfixcollector.BuildBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(path)
}
