//go:build integration

package deploy_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// goMemLimitShare is the Go runtime's soft memory limit (GOMEMLIMIT) as a
// share of a collector container's memory limit (docs/deploy.md, "Memory
// and GC").
const goMemLimitShare = 0.55

// Every collector container of every deployment path sets GOMEMLIMIT to 55 %
// of its memory limit (GOGC alone lets the heap grow to a multiple of what is
// live, past the limit, and the container is killed before the
// memory_limiter's forced GCs help), at or below the memory_limiter's soft
// limit, where there is one: the Go GC keeps garbage under the soft limit, so
// the memory_limiter refuses data only when what is live does not fit. Every
// gateway that runs flow_correlation has the same GOGC, whichever path
// deployed it (the load run, testbed/e2e, runs the kustomize one).
func TestGoMemLimit(t *testing.T) {
	var all []collector
	for _, r := range append(kustomizeVariants(t), helmVariants(t)...) {
		all = append(all, workloadCollectors(t, r.name, r.objs)...)
	}
	all = append(all, workloadCollectors(t, "kustomize examples/flow-stream", objects(t, kustomize(t, "examples/flow-stream")))...)
	custom := "helm gateway 3Gi, node 1G, flow stream 768Mi"
	all = append(all, workloadCollectors(t, custom, objects(t, run(t, nil, helm(t), "template", "flowtel", chartDir(), "--namespace", "flowtel",
		"--set", "flowStream.enabled=true", "--set", "gateway.resources.limits.memory=3Gi", "--set", "node.resources.limits.memory=1G",
		"--set", "flowStream.resources.limits.memory=768Mi")))...)
	nodeCR, gwCR := operatorCRs(t)
	all = append(all, operatorCollector(t, "operator", nodeCR), operatorCollector(t, "operator", gwCR))

	seen := map[string]bool{}
	gogc := map[string][]string{} // GOGC value -> gateways with flow_correlation
	for _, c := range all {
		limit, ok := c.resources.Limits["memory"]
		if !ok {
			t.Errorf("%s: no memory limit", c.source)
			continue
		}
		got, err := parseGoMemLimit(c.env["GOMEMLIMIT"])
		if err != nil {
			t.Errorf("%s: GOMEMLIMIT: %v", c.source, err)
			continue
		}
		seen[strings.TrimSuffix(strings.Fields(c.source)[0], ":")] = true
		want := goMemLimitShare * float64(limit.Value())
		if float64(got) > want || float64(got) < want-(1<<20) {
			t.Errorf("%s: GOMEMLIMIT %s is not %.0f %% of limits.memory %s (%.0f bytes)", c.source, c.env["GOMEMLIMIT"], 100*goMemLimitShare, limit.String(), want)
		}
		if soft, hard, ok := memoryLimiter(t, c); ok && !(goMemLimitShare <= soft && soft < hard) {
			t.Errorf("%s: memory_limiter soft %.0f %% / hard %.0f %% of the limit: want GOMEMLIMIT (%.0f %%) <= soft < hard", c.source, 100*soft, 100*hard, 100*goMemLimitShare)
		}
		if strings.Contains(string(c.config), "flow_correlation:") {
			gogc[c.env["GOGC"]] = append(gogc[c.env["GOGC"]], c.source)
		}
	}
	if len(gogc[""]) > 0 {
		t.Errorf("gateways without GOGC: %v", gogc[""])
	}
	if len(gogc) != 1 {
		t.Errorf("the gateways' GOGC differs between deployment paths: %v", gogc)
	}
	for _, path := range []string{"kustomize", "helm", "operator"} {
		if !seen[path] {
			t.Errorf("no %s collector checked", path)
		}
	}
	if custom := customLimits(all, custom); custom != 3 {
		t.Errorf("the custom Helm limits: %d collectors checked, want 3", custom)
	}
}

func customLimits(all []collector, source string) (n int) {
	for _, c := range all {
		if strings.HasPrefix(c.source, source) {
			n++
		}
	}
	return n
}

// parseGoMemLimit reads a GOMEMLIMIT value as the Go runtime does: a number
// of bytes with an optional B, KiB, MiB, GiB or TiB suffix.
func parseGoMemLimit(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("not set")
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size the Go runtime reads", s)
	}
	return n * mult, nil
}

// memoryLimiter returns the memory_limiter's soft and hard limits as shares
// of the container's memory, when the configuration has one.
func memoryLimiter(t *testing.T, c collector) (soft, hard float64, ok bool) {
	var cfg struct {
		Processors map[string]struct {
			Limit int `yaml:"limit_percentage"`
			Spike int `yaml:"spike_limit_percentage"`
		} `yaml:"processors"`
	}
	if err := yaml.Unmarshal(c.config, &cfg); err != nil {
		t.Fatalf("%s: %v", c.source, err)
	}
	ml, ok := cfg.Processors["memory_limiter"]
	if !ok {
		return 0, 0, false
	}
	if ml.Limit == 0 {
		t.Errorf("%s: memory_limiter without limit_percentage", c.source)
	}
	return float64(ml.Limit-ml.Spike) / 100, float64(ml.Limit) / 100, true
}

// A collector container without a memory limit gets no GOMEMLIMIT (55 % of
// nothing), and no empty env either: the chart renders no `env: null`.
func TestGoMemLimitWithoutMemoryLimits(t *testing.T) {
	objs := objects(t, run(t, nil, helm(t), "template", "flowtel", chartDir(), "--namespace", "flowtel",
		"--set", "flowStream.enabled=true", "--set", "gateway.resources.limits=null", "--set", "node.resources.limits=null",
		"--set", "flowStream.resources.limits=null"))
	cs := workloadCollectors(t, "helm without memory limits", objs)
	if len(cs) != 3 {
		t.Fatalf("%d collectors rendered, want 3 (node, gateway, flow stream)", len(cs))
	}
	for _, c := range cs {
		if _, ok := c.resources.Limits["memory"]; ok {
			t.Errorf("%s: still has a memory limit", c.source)
		}
		if v, ok := c.env["GOMEMLIMIT"]; ok {
			t.Errorf("%s: GOMEMLIMIT %q without a memory limit", c.source, v)
		}
	}
	for _, o := range objs {
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if env, ok := c.(map[string]any)["env"]; ok && env == nil {
				t.Errorf("%s %s: container %v renders env: null", o.GetKind(), o.GetName(), c.(map[string]any)["name"])
			}
		}
	}
}
