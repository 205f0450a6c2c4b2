// Package ipfixcollector runs the real go-ipfix v0.17.0 collector
// (github.com/vmware/go-ipfix/cmd/collector) for tests: the ipfix exporter's
// interoperability tests and the end-to-end testbed use the same harness.
//
// The collector is built once per machine and version (Build) in a throw-away
// module, so go-ipfix's own dependencies never enter flowtel's go.mod. It serves
// the records it decoded on :8080/records, a port it hard-codes, so each
// collector runs in a network namespace of its own (a new one, or one the
// caller created, such as a netlab host), and clients reach it through Netns.
//
// Everything here needs root (network namespaces); Start skips the test when
// not run as root.
package ipfixcollector
