//go:build integration

package deploy_test

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flowtel/flowtel/distributions"
)

// The flow stream's history as each path ships it: the fan-in reads the table
// the gateways' clickhouse_flows writes (same endpoint, database and table),
// as a user from a Secret, and only where the gateways write ClickHouse. The
// kustomize example stacks three components that each add a --config to a
// workload: none may drop another's.
func TestFlowStreamHistory(t *testing.T) {
	helmWith := func(set ...string) []*unstructured.Unstructured {
		args := []string{"template", "flowtel", chartDir(), "--namespace", "flowtel", "--set", "flowStream.enabled=true"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		return objects(t, run(t, nil, helm(t), args...))
	}
	const writer, reader = "ch-writer", "ch-reader"
	for _, tc := range []struct {
		name   string
		objs   []*unstructured.Unstructured
		secret string // the Secret the history's user comes from ("": none)
		want   bool   // history configured
	}{
		{"kustomize examples/flow-stream-history", objects(t, kustomize(t, "examples/flow-stream-history")), "flowtel-clickhouse-reader", true},
		{"kustomize examples/flow-stream", objects(t, kustomize(t, "examples/flow-stream")), "", false},
		{"helm sinks.clickhouse", helmWith("sinks.clickhouse.enabled=true", "sinks.clickhouse.existingSecret="+writer), writer, true},
		{"helm sinks.clickhouse flowStream.history.existingSecret", helmWith("sinks.clickhouse.enabled=true", "sinks.clickhouse.existingSecret="+writer, "flowStream.history.existingSecret="+reader), reader, true},
		{"helm sinks.clickhouse without a Secret", helmWith("sinks.clickhouse.enabled=true", "sinks.clickhouse.endpoint=tls://ch.example:9440", "sinks.clickhouse.config.tls.insecure_skip_verify=true"), "", true},
		{"helm flowStream.history.enabled=false", helmWith("sinks.clickhouse.enabled=true", "flowStream.history.enabled=false"), "", false},
		{"helm without sinks.clickhouse", helmWith(), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gateway, fanIn *collector
			for _, c := range workloadCollectors(t, tc.name, tc.objs) {
				switch {
				case c.dist == distributions.Gateway && strings.Contains(c.source, "StatefulSet"):
					gateway = &c
				case c.dist == distributions.Gateway && strings.Contains(c.source, "Deployment"):
					fanIn = &c
				}
			}
			if gateway == nil || fanIn == nil {
				t.Fatalf("no gateway StatefulSet (%v) or fan-in Deployment (%v)", gateway != nil, fanIn != nil)
			}
			var gw map[string]any
			if err := yaml.Unmarshal(gateway.config, &gw); err != nil {
				t.Fatal(err)
			}
			if at(gw, "exporters", "otlp/flowstream") == nil {
				t.Errorf("the gateway's --config files lose the export to the fan-in: args %v", gateway.pod.Spec.Containers[0].Args)
			}
			raw := fanIn.validate(t)
			history, _ := at(raw, "exporters", "flow_stream", "history").(map[string]any)
			if !tc.want {
				if history != nil {
					t.Errorf("history configured without the gateways writing ClickHouse: %v", history)
				}
				return
			}
			sink, _ := at(gw, "exporters", "clickhouse_flows").(map[string]any)
			if sink == nil {
				t.Fatalf("the gateway's --config files lose the ClickHouse sink: args %v", gateway.pod.Spec.Containers[0].Args)
			}
			for _, key := range []string{"endpoint", "database", "table", "tls"} {
				if got, want := fmt.Sprint(history[key]), fmt.Sprint(sink[key]); got != want {
					t.Errorf("history %s %s, the gateways write %s", key, got, want)
				}
			}
			if history["max_rows"] == nil {
				t.Errorf("history without max_rows: %v", history)
			}
			env := containerNamed(t, fanIn.source, fanIn.pod.Spec.Containers, "collector").Env
			for _, field := range []string{"username", "password"} {
				from := secretOf(env, history[field])
				if from != tc.secret {
					t.Errorf("history %s from Secret %q, want %q (env %v)", field, from, tc.secret, env)
				}
			}
		})
	}
}

// secretOf names the Secret an environment stand-in (envValues: "secret-<key>")
// was read from, "" when the value is not from one.
func secretOf(env []corev1.EnvVar, value any) string {
	s, _ := value.(string)
	for _, v := range env {
		if r := v.ValueFrom; r != nil && r.SecretKeyRef != nil && s == "secret-"+r.SecretKeyRef.Key {
			return r.SecretKeyRef.Name
		}
	}
	return ""
}
