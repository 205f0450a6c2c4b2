package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/flowtel/flowtel/internal/policyinsight"
)

// policyCommand holds flowctl policy what-if and recommend (internal/policyinsight).
func policyCommand(kube *genericclioptions.ConfigFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "what-if of a policy draft, and recommended policies, over the connections in ClickHouse",
		Long: "flowctl policy evaluates network policies against the connections recorded in ClickHouse (or, with what-if --follow, the flow stream).",
		Args: cobra.ArbitraryArgs, RunE: group}
	cmd.AddCommand(whatIfCommand(kube), recommendCommand(kube))
	return cmd
}

// policyFlags are what both subcommands read: the API server (kubeconfig),
// the flows table and the window.
type policyFlags struct {
	// conn is the kubeconfig (the policies and Namespaces are read as its
	// user) and, for what-if --follow, where the flow stream is.
	conn  connFlags
	ch    clickhouseFlags
	since string
	from  time.Time // the window's start, from since
	// labels are the API server's for the workloads whose records carry
	// none (load fills it when it reads ClickHouse).
	labels *policyinsight.APILabels
}

// register adds the flags; stream adds the flow stream's too (what-if
// --follow reads it).
func (p *policyFlags) register(fs *pflag.FlagSet, kube *genericclioptions.ConfigFlags, since string, stream bool) {
	p.conn.kube = kube
	if stream {
		p.conn.register(fs)
	}
	p.ch.register(fs, "(required, but with --follow)")
	fs.StringVar(&p.since, "since", since, "connections that ended after this: a duration (24h, 7d) or an RFC 3339 time")
}

// check validates the flags, before anything is read; follow reads the
// flow stream instead of ClickHouse.
func (p *policyFlags) check(follow bool) error {
	switch {
	case follow && p.ch.url != "":
		return errors.New("--follow reads the flow stream, --clickhouse the flows table: give one")
	case !follow && p.ch.url == "":
		return errors.New("--clickhouse: required (the flows table's HTTP interface, e.g. http://127.0.0.1:8123 through kubectl port-forward)")
	}
	var err error
	p.from, err = parseSince(p.since, time.Now())
	return err
}

// load reads the cluster's policies and the recorded flows of namespace
// ("" every Namespace) since the window's start. contextNS is the
// kubeconfig context's Namespace.
func (p *policyFlags) load(ctx context.Context, namespace func(contextNS string) (string, error)) (snap *policyinsight.Snapshot, rec *policyinsight.Recording, ns string, err error) {
	_, cfg, contextNS, err := loadKube(p.conn.kube)
	if err != nil {
		return nil, nil, "", err
	}
	if ns, err = namespace(contextNS); err != nil {
		return nil, nil, "", err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	pol, err := policyclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	if snap, err = policyinsight.Load(ctx, kube, pol); err != nil {
		return nil, nil, "", err
	}
	rec = &policyinsight.Recording{}
	if p.ch.url == "" {
		return snap, rec, ns, nil // --follow: the stream brings them
	}
	if err = p.ch.query(ctx, func(table string) string { return policyinsight.FlowsQuery(table, p.from, ns) }, rec.AddRow); err != nil {
		return nil, nil, "", err
	}
	// Without k8s_flow's pod_labels (off as shipped) the rows carry no
	// labels: the workloads' own, from the API server, stand in.
	rec, p.labels = policyinsight.ResolveLabels(ctx, kube, rec)
	return snap, rec, ns, nil
}

// namespaceName is what a Namespace name can be (a DNS label): it is put
// into the query as a literal.
var namespaceName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// scopeNamespace resolves -n / --cluster-wide ("" is every Namespace).
func scopeNamespace(sc *scopeFlags, contextNS string) (string, error) {
	if sc.clusterWide {
		if sc.given() != "" {
			return "", errors.New("-n and --cluster-wide exclude each other")
		}
		return "", nil
	}
	ns := sc.given()
	if ns == "" {
		ns = contextNS
	}
	if !namespaceName.MatchString(ns) {
		return "", fmt.Errorf("-n: %q is not a Namespace name", ns)
	}
	return ns, nil
}

// whatIfCommand prints the recorded connections whose verdict a draft
// would change; it fails when the draft would deny any.
func whatIfCommand(kube *genericclioptions.ConfigFlags) *cobra.Command {
	cmd := newCommand("what-if", "the recorded connections a policy draft would deny or admit anew (exit 1 when it would deny any)")
	fs := cmd.Flags()
	var pf policyFlags
	var sc scopeFlags
	pf.register(fs, kube, "24h", true)
	sc.register(fs, kube)
	follow := fs.Bool("follow", false, "read the flow stream (its history since --since, then live flows until interrupted) instead of ClickHouse, and print each changed verdict when its flow first appears")
	draftFile := fs.StringP("filename", "f", "", "the draft: YAML or JSON NetworkPolicies, AdminNetworkPolicies, BaselineAdminNetworkPolicies to create or change, or to delete (annotated "+policyinsight.DeleteAnnotation+": delete); - is stdin")
	output := fs.StringP("output", "o", "table", "output: table or json")
	return runs(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
		if *output != "table" && *output != "json" {
			return fmt.Errorf("-o: %q is not table or json", *output)
		}
		if *draftFile == "" {
			return errors.New("-f: the draft is required")
		}
		if err := pf.check(*follow); err != nil {
			return err
		}
		var in io.Reader = os.Stdin
		if *draftFile != "-" {
			f, err := os.Open(*draftFile)
			if err != nil {
				return fmt.Errorf("-f: %w", err)
			}
			defer f.Close()
			in = f
		}
		var draft *policyinsight.Draft
		snap, rec, ns, err := pf.load(ctx, func(contextNS string) (string, error) {
			ns, err := scopeNamespace(&sc, contextNS)
			if err != nil {
				return "", err
			}
			// A NetworkPolicy of the draft without a Namespace is in the scope's.
			draft, err = policyinsight.ParseDraft(in, cmp.Or(ns, contextNS))
			return ns, err
		})
		if err != nil {
			return err
		}
		if *follow {
			ev, err := policyinsight.NewEvaluator(snap, draft)
			if err != nil {
				return err
			}
			return followWhatIf(ctx, &pf, &sc, ev, *output == "json", stdout, stderr)
		}
		if pf.labels != nil {
			for _, k := range slices.Sorted(maps.Keys(pf.labels.Missing)) {
				fmt.Fprintln(stderr, "flowctl: note:", pf.labels.Note(k, "its connections are undetermined where a selector must match it"))
			}
		}
		rep, err := policyinsight.WhatIf(snap, draft, rec.Flows())
		if err != nil {
			return err
		}
		scope := "every Namespace"
		if ns != "" {
			scope = "Namespace " + ns
		}
		fmt.Fprintf(stderr, "flowctl: %d recorded connections (%s, since %s) against %d policies with the draft's %d changes\n",
			rep.Connections, scope, pf.from.UTC().Format(time.RFC3339), snap.Len(), len(draft.Refs()))
		if *output == "json" {
			b, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
				return err
			}
		} else if err := writeChanges(stdout, rep.Changes); err != nil {
			return err
		}
		if n := rep.NewlyDenied(); n > 0 {
			return fmt.Errorf("the draft would deny %d recorded connections the cluster's policies admit", n)
		}
		return nil
	})
}

// writeChanges prints the changes as a table.
func writeChanges(w io.Writer, changes []policyinsight.Change) error {
	if len(changes) == 0 {
		_, err := fmt.Fprintln(w, "No recorded connection changes verdict.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANGE\tSOURCE\tDESTINATION\tPORT\tCONNECTIONS\tDECIDED BY")
	for _, c := range changes {
		fmt.Fprintf(tw, "%s -> %s\t%s\t%s\t%s/%d\t%d\t%s\n", c.Before, c.After, c.Source, c.Destination, c.Protocol, c.Port,
			c.Connections, rulesText(c))
	}
	return tw.Flush()
}

// rulesText reads a change's deciding rules, "; " between them.
func rulesText(c policyinsight.Change) string {
	rules := make([]string, 0, len(c.Rules))
	for _, r := range c.Rules {
		rules = append(rules, ruleText(r))
	}
	return strings.Join(rules, "; ")
}

// ruleText reads a deciding rule: "egress: NetworkPolicy shop/api rule
// egress-1 (allowed)", "ingress: no policy (unisolated)".
func ruleText(r policyinsight.Rule) string {
	if r.Kind == "" {
		return r.Direction + ": no policy (" + r.Outcome + ")"
	}
	name := r.Policy
	if r.Namespace != "" {
		name = r.Namespace + "/" + name
	}
	s := r.Direction + ": " + r.Kind + " " + name
	if r.Rule != "" {
		s += " rule " + r.Rule
	} else if r.Outcome == "denied" {
		s += " (no rule admits it)"
		return s
	}
	return s + " (" + r.Outcome + ")"
}

// recommendCommand writes least-privilege policies for a Namespace, and
// verifies them by what-if over the same window.
func recommendCommand(kube *genericclioptions.ConfigFlags) *cobra.Command {
	cmd := newCommand("recommend", "least-privilege NetworkPolicies or AdminNetworkPolicies for a Namespace (-n) from its recorded connections")
	fs := cmd.Flags()
	var pf policyFlags
	pf.register(fs, kube, "7d", false)
	isolation := fs.String("isolation", "applied", "applied: isolate only the workloads seen; all: also deny every other Pod of the Namespace (a default-deny policy)")
	kind := fs.String("kind", "np", "policy kind: np (NetworkPolicy per workload) or anp (AdminNetworkPolicy per workload)")
	priority := fs.Int("priority", 100, "with --kind anp: the first AdminNetworkPolicy's priority, the next workload's one more")
	minObserved := fs.Duration("min-observed", time.Hour, "a workload seen for less than this gets no policy with --isolation applied, and one with a note with all")
	output := fs.StringP("output", "o", "-", "output file for the YAML; - is stdout")
	return runs(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
		iso := policyinsight.Isolation(*isolation)
		if iso != policyinsight.IsolateApplied && iso != policyinsight.IsolateAll {
			return fmt.Errorf("--isolation: %q is not applied or all", *isolation)
		}
		if *kind != policyinsight.RecommendNetworkPolicies && *kind != policyinsight.RecommendAdminPolicies {
			return fmt.Errorf("--kind: %q is not np or anp", *kind)
		}
		if *priority < 0 || *priority > 1000 {
			return fmt.Errorf("--priority: %d is not in 0..1000 (the AdminNetworkPolicy API's range)", *priority)
		}
		if err := pf.check(false); err != nil {
			return err
		}
		sc := scopeFlags{kube: kube}
		snap, rec, ns, err := pf.load(ctx, func(contextNS string) (string, error) { return scopeNamespace(&sc, contextNS) })
		if err != nil {
			return err
		}
		r := policyinsight.Recommend(ns, rec.Flows(), policyinsight.RecommendOptions{Isolation: iso, MinObserved: *minObserved,
			Kind: *kind, Priority: int32(*priority), APILabels: pf.labels})
		for _, n := range r.Notes {
			fmt.Fprintln(stderr, "flowctl: note:", n)
		}
		// The verification: the cluster with the recommendation, over the
		// same connections.
		rep, err := policyinsight.WhatIf(snap, r.Draft(), rec.Flows())
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "flowctl: %d policies for Namespace %s from %d recorded connections since %s; what-if over them: %d newly denied\n",
			len(r.Policies)+len(r.AdminPolicies), ns, rep.Connections, pf.from.UTC().Format(time.RFC3339), rep.NewlyDenied())
		y, err := r.YAML()
		if err != nil {
			return err
		}
		if *output == "-" {
			_, err = stdout.Write(y)
		} else {
			err = os.WriteFile(*output, y, 0o644)
		}
		if err != nil {
			return err
		}
		if n := rep.NewlyDenied(); n > 0 {
			if err := writeChanges(stderr, rep.Changes); err != nil {
				return err
			}
			return fmt.Errorf("the recommendation would deny %d recorded connections (with the cluster's other policies)", n)
		}
		return nil
	})
}
