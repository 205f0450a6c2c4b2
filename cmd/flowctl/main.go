// Command flowctl reads flowtel's flow stream (the flow_stream exporter's
// FlowStreamService) with the caller's Kubernetes credentials. Installed as
// kubectl-flows on PATH, it is also the kubectl plugin "kubectl flows".
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
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// pluginName is the executable's name that makes flowctl the kubectl
// plugin "kubectl flows".
const pluginName = "kubectl-flows"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runAs(ctx, filepath.Base(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command as flowctl and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runAs(ctx, "flowctl", args, stdout, stderr)
}

// usageError is a command line flowctl cannot run (exit code 2): an unknown
// command or flag, an argument where none is taken.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// runAs executes one command, invoked as the executable name exe (the help
// then says "kubectl flows" for kubectl-flows), and returns the exit code:
// 0, 1 when the command failed, 2 for a command line it cannot run.
func runAs(ctx context.Context, exe string, args []string, stdout, stderr io.Writer) int {
	root := newRoot(strings.TrimSuffix(exe, ".exe") == pluginName)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := singleDashLong(root, args)
	if err == nil {
		cmd, err = root.ExecuteContextC(ctx)
	}
	if err == nil {
		return 0
	}
	name := root.DisplayName()
	if cmd != nil {
		name = cmd.CommandPath()
	}
	var usage usageError
	if errors.As(err, &usage) || isCobraUsage(err) {
		fmt.Fprintf(stderr, "%s: %v\nSee '%s --help'.\n", root.DisplayName(), err, name)
		return 2
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", root.DisplayName(), err)
	return 1
}

// isCobraUsage: cobra's own errors about the command line (not those of a
// command's run).
func isCobraUsage(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "unknown command ") || strings.HasPrefix(s, "unknown flag") ||
		strings.HasPrefix(s, "unknown shorthand flag") || strings.HasPrefix(s, "invalid argument ") ||
		strings.HasPrefix(s, "flag needs an argument") || strings.HasPrefix(s, "accepts ") ||
		strings.Contains(s, "required flag(s)")
}

// singleDashLong refuses a long flag written with one dash ("-since 5m"),
// which Go's flag package took and pflag reads as shorthands (-s ince:
// --server=ince), before the command runs; it returns the command named.
func singleDashLong(root *cobra.Command, args []string) (*cobra.Command, error) {
	cmd, _, err := root.Find(args)
	if err != nil {
		return nil, nil // cobra reports it
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil {
			return cmd, usageError{fmt.Errorf("%s: a long flag takes two dashes: -%s", a, a)}
		}
	}
	return nil, nil
}

// errUsage ends a command whose usage was already printed, with exit code 2.
var errUsage = errors.New("usage")

// newRoot builds the command tree. asPlugin names it "kubectl flows".
func newRoot(asPlugin bool) *cobra.Command {
	kube := genericclioptions.NewConfigFlags(false)
	root := &cobra.Command{
		Use:   "flowctl",
		Short: "Read flowtel's flow stream with your Kubernetes credentials",
		Long: `flowctl reads flowtel's flow stream with your Kubernetes credentials (map and policy also
ClickHouse). The Kubernetes connection flags (--kubeconfig, --context, -n, --token, --as, ...)
are kubectl's; the flow stream's own address and TLS are --stream-server, --ca-file,
--stream-tls-server-name and --stream-insecure-skip-tls-verify.`,
		Args:          cobra.ArbitraryArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE:          group,
	}
	if asPlugin {
		root.Use = pluginName
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl flows"}
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	kube.AddFlags(root.PersistentFlags())
	root.AddCommand(observeCommand(kube), recordsCommand(kube), metricsCommand(), mapCommand(kube),
		topCommand(kube), uiCommand(kube), policyCommand(kube))
	return root
}

// group runs a command that only holds subcommands: without one it prints
// its help (exit 2); an unknown one is a usage error.
func group(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Help()
		return errUsage
	}
	return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
}

// newCommand is a command taking flags only.
func newCommand(use, short string) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: noArgs}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", args[0])}
	}
	return nil
}

// runs sets cmd's run function, which gets the context and the output.
func runs(cmd *cobra.Command, run func(ctx context.Context, stdout, stderr io.Writer) error) *cobra.Command {
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		return run(c.Context(), c.OutOrStdout(), c.ErrOrStderr())
	}
	return cmd
}
