package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// flowEnd is one end of a flow as a source reports it.
type flowEnd struct {
	Kind         string // pod, node or external; "" when the source does not say
	Namespace    string
	Pod          string
	WorkloadKind string
	Workload     string
	Node         string
	Address      string
	Redacted     bool // the flow stream withheld the peer's identity
}

// Outcomes of a connection that the map draws apart from the others.
const (
	outcomeRefused = "refused" // a TCP SYN answered by a reset
	outcomeDenied  = "denied"  // dropped or rejected by a NetworkPolicy rule
)

// mapFlow is what a source reports for one or more connections between two
// ends with one outcome ("", refused or denied): how many, and their bytes
// (both directions).
type mapFlow struct {
	Src, Dst           flowEnd
	Outcome            string
	Connections, Bytes uint64
}

// vertex is a node of the map.
type vertex struct {
	ID        string
	Kind      string // workload, pod, node, external, redacted
	Namespace string // the cluster it is drawn in; "" for Nodes and external peers
	Label     string
}

// vertex returns the map node of an end: its workload (byWorkload, when the
// Pod has an owner), else its Pod, Node or address.
func (e flowEnd) vertex(byWorkload bool) vertex {
	switch {
	case e.Redacted:
		return vertex{ID: "redacted/" + e.Namespace, Kind: "redacted", Namespace: e.Namespace, Label: "[redacted]"}
	case e.Pod != "" && byWorkload && e.Workload != "":
		kind := e.WorkloadKind
		if kind == "" {
			kind = "Workload"
		}
		return vertex{ID: "workload/" + e.Namespace + "/" + kind + "/" + e.Workload, Kind: "workload", Namespace: e.Namespace, Label: kind + " " + e.Workload}
	case e.Pod != "":
		return vertex{ID: "pod/" + e.Namespace + "/" + e.Pod, Kind: "pod", Namespace: e.Namespace, Label: e.Pod}
	case e.Kind == "node" || (e.Kind == "" && e.Node != ""):
		return vertex{ID: "node/" + e.Node, Kind: "node", Label: e.Node}
	}
	addr := e.Address
	if addr == "" {
		addr = "unknown"
	}
	return vertex{ID: "external/" + addr, Kind: "external", Label: addr}
}

// edge is the sum of the flows from one vertex to another with one outcome.
type edge struct {
	From, To, Outcome  string
	Connections, Bytes uint64
}

// workloadGraph is the map: vertices, and edges keyed by their two ends and
// outcome (refused and denied connections get edges of their own).
type workloadGraph struct {
	byWorkload bool
	vertices   map[string]vertex
	edges      map[[3]string]*edge
}

func newGraph(byWorkload bool) *workloadGraph {
	return &workloadGraph{byWorkload: byWorkload, vertices: map[string]vertex{}, edges: map[[3]string]*edge{}}
}

func (g *workloadGraph) add(f mapFlow) {
	s, d := f.Src.vertex(g.byWorkload), f.Dst.vertex(g.byWorkload)
	g.vertices[s.ID], g.vertices[d.ID] = s, d
	k := [3]string{s.ID, d.ID, f.Outcome}
	e := g.edges[k]
	if e == nil {
		e = &edge{From: s.ID, To: d.ID, Outcome: f.Outcome}
		g.edges[k] = e
	}
	e.Connections += f.Connections
	e.Bytes += f.Bytes
}

// Shapes of the vertex kinds.
var shapes = map[string]string{
	"workload": `shape=box, style="rounded,filled", fillcolor="#dbe9f6"`,
	"pod":      `shape=ellipse, style=filled, fillcolor="#eef5fb"`,
	"node":     `shape=box3d, style=filled, fillcolor="#e8e8e8"`,
	"external": `shape=ellipse, style=dashed`,
	"redacted": `shape=ellipse, style=dotted`,
}

// quote renders a DOT string.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// humanBytes renders a byte count in SI units: 5100 → "5.1 kB".
func humanBytes(n uint64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n), 0
	for v >= 1000 && unit < 5 {
		v /= 1000
		unit++
	}
	return fmt.Sprintf("%.1f %cB", v, "kMGTP"[unit-1])
}

// writeDOT writes the map as a Graphviz digraph: a cluster per Namespace,
// Nodes and external peers outside, one edge per pair of vertices labelled
// with connections and bytes, and beside it an edge for the pair's refused
// connections (orange, dashed) and one for its denied ones (red, bold, tee
// arrow). Every edge also carries the attributes connections, bytes and
// outcome (ok, refused, denied), for programs.
func (g *workloadGraph) writeDOT(w io.Writer, title string) error {
	bw := bufio.NewWriter(w)
	var conns, bytes uint64
	for _, e := range g.edges {
		conns += e.Connections
		bytes += e.Bytes
	}
	fmt.Fprintln(bw, "digraph flows {")
	fmt.Fprintf(bw, "  graph [rankdir=LR, fontname=Helvetica, fontsize=12, labelloc=t, label=%s];\n",
		quote(fmt.Sprintf("%s: %d connections, %s", title, conns, humanBytes(bytes))))
	fmt.Fprintln(bw, "  node [fontname=Helvetica, fontsize=10];")
	fmt.Fprintln(bw, "  edge [fontname=Helvetica, fontsize=9, color=\"#555555\"];")

	ids := make([]string, 0, len(g.vertices))
	for id := range g.vertices {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	byNS := map[string][]vertex{}
	var namespaces []string
	for _, id := range ids {
		v := g.vertices[id]
		if _, ok := byNS[v.Namespace]; !ok {
			namespaces = append(namespaces, v.Namespace)
		}
		byNS[v.Namespace] = append(byNS[v.Namespace], v)
	}
	sort.Strings(namespaces)
	writeVertex := func(indent string, v vertex) {
		fmt.Fprintf(bw, "%s%s [label=%s, kind=%s, %s];\n", indent, quote(v.ID), quote(v.Label), quote(v.Kind), shapes[v.Kind])
	}
	for _, ns := range namespaces {
		if ns == "" {
			continue
		}
		fmt.Fprintf(bw, "  subgraph %s {\n", quote("cluster_"+ns))
		fmt.Fprintf(bw, "    label=%s; labeljust=l; style=rounded; color=\"#7f7f7f\";\n", quote(ns))
		for _, v := range byNS[ns] {
			writeVertex("    ", v)
		}
		fmt.Fprintln(bw, "  }")
	}
	for _, v := range byNS[""] {
		writeVertex("  ", v)
	}

	keys := make([][3]string, 0, len(g.edges))
	for k := range g.edges {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		for n := range keys[i] {
			if keys[i][n] != keys[j][n] {
				return keys[i][n] < keys[j][n]
			}
		}
		return false
	})
	for _, k := range keys {
		e := g.edges[k]
		unit := "connections"
		if e.Connections == 1 {
			unit = "connection"
		}
		label := fmt.Sprintf("%d %s, %s", e.Connections, unit, humanBytes(e.Bytes))
		outcome, style := "ok", fmt.Sprintf("penwidth=%.1f", 1+math.Min(3, math.Log10(float64(e.Bytes)+1)/2))
		switch e.Outcome {
		case outcomeRefused:
			outcome, label = e.Outcome, "refused: "+label
			style += `, color="#ff7f0e", fontcolor="#ff7f0e", style=dashed`
		case outcomeDenied:
			outcome, label = e.Outcome, "denied: "+label
			style += `, color="#d62728", fontcolor="#d62728", style=bold, arrowhead=tee`
		}
		fmt.Fprintf(bw, "  %s -> %s [label=%s, outcome=%s, connections=%d, bytes=%d, %s];\n",
			quote(e.From), quote(e.To), quote(label), outcome, e.Connections, e.Bytes, style)
	}
	fmt.Fprintln(bw, "}")
	return bw.Flush()
}
