// Command flowctl reads flowtel's flow stream (the flow_stream exporter's
// FlowStreamService) with the caller's Kubernetes credentials.
//
//	flowctl observe -n shop -f
//	flowctl observe --cluster-wide --flow-type to-external -o jsonl
//	flowctl records --srcip 10.10.0.5 --dstport 8080
//	flowctl metrics --url http://127.0.0.1:8888/metrics
//	flowctl map --cluster-wide -o map.svg
//	flowctl map --clickhouse http://127.0.0.1:8123 -o map.svg
//	flowctl ui --listen 127.0.0.1:8080
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `flowctl reads flowtel's flow stream with your Kubernetes credentials (map and policy also ClickHouse).

Commands:
  observe   stream flows: history, then live ones with -f
  records   print the flow records the gateway holds, filtered by 5-tuple
  metrics   print a collector's record counters (received, exported, dropped, pending)
  map       draw who talks to whom (flow stream or ClickHouse) as Graphviz DOT, SVG or PNG
  top       the top talkers over a window (workload pairs, Services or Namespaces), summed by the gateway
  ui        serve a live web view (map and flows table) of the flow stream on this machine
  policy    what-if of a policy draft, and recommended policies, over the connections in ClickHouse

Run "flowctl <command> -h" for its flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "observe":
		err = observe(ctx, args[1:], stdout, stderr)
	case "records":
		err = records(ctx, args[1:], stdout, stderr)
	case "metrics":
		err = metrics(ctx, args[1:], stdout, stderr)
	case "map":
		err = mapCommand(ctx, args[1:], stdout, stderr)
	case "ui":
		err = uiCommand(ctx, args[1:], stdout, stderr)
	case "policy":
		err = policyCommand(ctx, args[1:], stdout, stderr)
	case "top":
		err = topCommand(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "flowctl: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err == errUsage {
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "flowctl:", err)
		return 1
	}
	return 0
}
