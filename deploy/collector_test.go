//go:build integration

package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol/otelcoltest"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flowtel/flowtel/distributions"
)

// collector is one collector a deployment path runs: its distribution, the
// configuration it is given and the environment and files it has.
type collector struct {
	source    string // e.g. "kustomize base: DaemonSet flowtel/flowtel-node"
	dist      string
	namespace string
	config    []byte
	env       map[string]string // values as the container would see them
	mounts    []corev1.VolumeMount
	volumes   []corev1.Volume
	pod       *corev1.PodTemplateSpec // nil for Operator CRs (the Operator makes the Pod)
	resources corev1.ResourceRequirements
}

// distribution tells the distribution from the image name.
func distribution(image string) (string, error) {
	for _, d := range []string{distributions.Node, distributions.Gateway} {
		if strings.Contains(image, "/"+d+":") {
			return d, nil
		}
	}
	return "", fmt.Errorf("image %q is none of the flowtel-node or flowtel-gateway images", image)
}

// envValues gives each variable the value the container would see; downward
// API and Secret values get stand-ins of the right shape.
func envValues(vars []corev1.EnvVar, namespace string) (map[string]string, error) {
	env := map[string]string{}
	for _, v := range vars {
		switch {
		case v.ValueFrom == nil:
			env[v.Name] = v.Value
		case v.ValueFrom.FieldRef != nil:
			switch v.ValueFrom.FieldRef.FieldPath {
			case "spec.nodeName":
				env[v.Name] = "node-1"
			case "metadata.namespace":
				env[v.Name] = namespace
			case "metadata.name":
				env[v.Name] = "pod-1"
			case "status.hostIP", "status.podIP":
				env[v.Name] = "10.0.0.1"
			default:
				return nil, fmt.Errorf("env %s: field %s has no stand-in", v.Name, v.ValueFrom.FieldRef.FieldPath)
			}
		case v.ValueFrom.SecretKeyRef != nil:
			env[v.Name] = "secret-" + v.ValueFrom.SecretKeyRef.Key
		default:
			return nil, fmt.Errorf("env %s: unsupported valueFrom", v.Name)
		}
	}
	return env, nil
}

// workloadCollectors extracts the collectors of the DaemonSets, StatefulSets
// and Deployments of a rendered manifest set, with the configuration from the
// ConfigMap their --config argument points into.
func workloadCollectors(t testing.TB, source string, objs []*unstructured.Unstructured) []collector {
	t.Helper()
	var out []collector
	for _, o := range objs {
		var tmpl *corev1.PodTemplateSpec
		switch o.GetKind() {
		case "DaemonSet":
			var ds appsv1.DaemonSet
			convert(t, o, &ds)
			tmpl = &ds.Spec.Template
		case "StatefulSet":
			var ss appsv1.StatefulSet
			convert(t, o, &ss)
			tmpl = &ss.Spec.Template
		case "Deployment":
			var d appsv1.Deployment
			convert(t, o, &d)
			tmpl = &d.Spec.Template
		default:
			continue
		}
		what := fmt.Sprintf("%s: %s %s/%s", source, o.GetKind(), o.GetNamespace(), o.GetName())
		c := containerNamed(t, what, tmpl.Spec.Containers, "collector")
		dist, err := distribution(c.Image)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		env, err := envValues(c.Env, o.GetNamespace())
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		out = append(out, collector{
			source: what, dist: dist, namespace: o.GetNamespace(),
			config: configFromConfigMap(t, what, objs, o.GetNamespace(), c, tmpl.Spec.Volumes),
			env:    env, mounts: c.VolumeMounts, volumes: tmpl.Spec.Volumes, pod: tmpl, resources: c.Resources,
		})
	}
	return out
}

func convert(t testing.TB, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func containerNamed(t testing.TB, what string, cs []corev1.Container, name string) *corev1.Container {
	t.Helper()
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	t.Fatalf("%s: no container %q", what, name)
	return nil
}

// configFromConfigMap follows every --config=<path> to its mounted ConfigMap
// key and merges the files as the collector does (maps merge, lists replace).
func configFromConfigMap(t testing.TB, what string, objs []*unstructured.Unstructured, namespace string, c *corev1.Container, volumes []corev1.Volume) []byte {
	t.Helper()
	var merged map[string]any
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		if file, ok := strings.CutPrefix(a, "--config="); ok {
			var m map[string]any
			if err := yaml.Unmarshal(configFile(t, what, objs, namespace, c, volumes, file), &m); err != nil {
				t.Fatalf("%s: --config=%s: %v", what, file, err)
			}
			merged = mergeConfig(merged, m)
		}
	}
	if merged == nil {
		t.Fatalf("%s: no --config=<file> argument", what)
	}
	out, err := yaml.Marshal(merged)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mergeConfig merges src over dst the way the collector merges several
// --config files: maps merge key by key, anything else is replaced.
func mergeConfig(dst, src map[string]any) map[string]any {
	if dst == nil {
		dst = map[string]any{}
	}
	for k, v := range src {
		sm, sok := v.(map[string]any)
		dm, dok := dst[k].(map[string]any)
		if sok && dok {
			dst[k] = mergeConfig(dm, sm)
		} else {
			dst[k] = v
		}
	}
	return dst
}

// configFile reads the ConfigMap key a mounted configuration file is.
func configFile(t testing.TB, what string, objs []*unstructured.Unstructured, namespace string, c *corev1.Container, volumes []corev1.Volume, file string) []byte {
	t.Helper()
	m, vol := mountOf(c.VolumeMounts, volumes, file)
	if vol == nil || vol.ConfigMap == nil {
		t.Fatalf("%s: --config=%s is not in a mounted ConfigMap", what, file)
	}
	key := strings.TrimPrefix(strings.TrimPrefix(file, m.MountPath), "/")
	for _, cm := range find(objs, "ConfigMap") {
		if cm.GetName() != vol.ConfigMap.Name || cm.GetNamespace() != namespace {
			continue
		}
		data, ok, _ := unstructured.NestedString(cm.Object, "data", key)
		if !ok {
			t.Fatalf("%s: ConfigMap %s has no key %q", what, cm.GetName(), key)
		}
		return []byte(data)
	}
	t.Fatalf("%s: ConfigMap %s/%s is not in the manifests", what, namespace, vol.ConfigMap.Name)
	return nil
}

// mountOf returns the mount and volume a file path lies in.
func mountOf(mounts []corev1.VolumeMount, volumes []corev1.Volume, file string) (*corev1.VolumeMount, *corev1.Volume) {
	for i := range mounts {
		m := &mounts[i]
		if file != m.MountPath && !strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
			continue
		}
		for j := range volumes {
			if volumes[j].Name == m.Name {
				return m, &volumes[j]
			}
		}
	}
	return nil, nil
}

// operatorCollector extracts the collector an OpenTelemetryCollector CR runs.
func operatorCollector(t testing.TB, source string, o *unstructured.Unstructured) collector {
	t.Helper()
	what := fmt.Sprintf("%s: %s %s/%s", source, o.GetKind(), o.GetNamespace(), o.GetName())
	var spec struct {
		Image        string                      `json:"image"`
		Env          []corev1.EnvVar             `json:"env"`
		Volumes      []corev1.Volume             `json:"volumes"`
		VolumeMounts []corev1.VolumeMount        `json:"volumeMounts"`
		Resources    corev1.ResourceRequirements `json:"resources"`
		Config       map[string]any              `json:"config"`
	}
	specMap, _, _ := unstructured.NestedMap(o.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(specMap, &spec); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	dist, err := distribution(spec.Image)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	env, err := envValues(spec.Env, o.GetNamespace())
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	env["POD_NAME"] = "pod-1" // the Operator always injects it
	cfg, err := yaml.Marshal(spec.Config)
	if err != nil {
		t.Fatal(err)
	}
	return collector{source: what, dist: dist, namespace: o.GetNamespace(), config: cfg, env: env, mounts: spec.VolumeMounts, volumes: spec.Volumes, resources: spec.Resources}
}

var envRef = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// validate loads the collector's configuration with its distribution's
// factories and the container's environment, exactly as `<binary> validate`
// does, and returns the resolved configuration as a map. It fails for an
// environment variable used without default that the container does not set,
// and for a file the configuration names that is not mounted.
func (c collector) validate(t *testing.T) map[string]any {
	t.Helper()
	for _, m := range envRef.FindAllStringSubmatch(string(c.config), -1) {
		name, hasDefault := m[1], m[2] != ""
		v, set := c.env[name]
		switch {
		case set:
			t.Setenv(name, v)
		case hasDefault:
			t.Setenv(name, "")
			os.Unsetenv(name) // restored by t.Setenv's cleanup
		default:
			t.Errorf("%s: the configuration uses ${env:%s}, which the container does not set", c.source, name)
			return nil
		}
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, c.config, 0o600); err != nil {
		t.Fatal(err)
	}
	factories, err := distributions.Factories(c.dist)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otelcoltest.LoadConfigAndValidate(file, factories); err != nil {
		t.Errorf("%s: %s rejects the configuration: %v\n%s", c.source, c.dist, err, c.config)
		return nil
	}
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{file},
		ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
		DefaultScheme:     "env",
	})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := resolver.Resolve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	raw := conf.ToStringMap()
	c.checkFiles(t, raw)
	return raw
}

// nodeTokenAudience is the audience the gateway's node_identity takes tokens for.
const nodeTokenAudience = "flowtel-gateway"

// checkFiles: every *_file the configuration reads is mounted (and, for a
// Secret volume with items, is one of them); the bearer token is a projected
// ServiceAccount token for the gateway's audience; every file_storage directory is
// on a writable volume (the root filesystem is read-only).
func (c collector) checkFiles(t *testing.T, raw map[string]any) {
	t.Helper()
	walk(raw, "", func(key string, v any) {
		s, ok := v.(string)
		if !ok || s == "" {
			return
		}
		leaf := key[strings.LastIndex(key, ".")+1:]
		switch {
		case strings.HasSuffix(leaf, "_file"):
			m, vol := mountOf(c.mounts, c.volumes, s)
			if vol == nil {
				t.Errorf("%s: %s = %s is not on any mounted volume", c.source, key, s)
				return
			}
			if vol.Secret != nil && len(vol.Secret.Items) > 0 {
				rel := strings.TrimPrefix(strings.TrimPrefix(s, m.MountPath), "/")
				found := false
				for _, it := range vol.Secret.Items {
					found = found || path.Clean(it.Path) == rel
				}
				if !found {
					t.Errorf("%s: %s = %s: Secret volume %s does not project %s", c.source, key, s, vol.Name, rel)
				}
			}
		case leaf == "filename" && strings.HasPrefix(key, "extensions.bearertokenauth"):
			// The token the gateway's node_identity reviews: the kubelet's
			// projected ServiceAccount token, for the gateway's audience.
			m, vol := mountOf(c.mounts, c.volumes, s)
			if vol == nil || vol.Projected == nil {
				t.Errorf("%s: %s = %s is not on a projected volume", c.source, key, s)
				return
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(s, m.MountPath), "/")
			found := false
			for _, src := range vol.Projected.Sources {
				if tok := src.ServiceAccountToken; tok != nil && path.Clean(tok.Path) == rel {
					found = true
					if tok.Audience != nodeTokenAudience {
						t.Errorf("%s: %s: the token's audience is %q, node_identity's is %q", c.source, key, tok.Audience, nodeTokenAudience)
					}
				}
			}
			if !found {
				t.Errorf("%s: %s = %s: volume %s projects no ServiceAccount token at %s", c.source, key, s, vol.Name, rel)
			}
		case leaf == "directory" && strings.HasPrefix(key, "extensions.file_storage"):
			m, vol := mountOf(c.mounts, c.volumes, s)
			if vol == nil || m.ReadOnly || vol.Secret != nil || vol.ConfigMap != nil {
				t.Errorf("%s: %s = %s is not on a writable volume", c.source, key, s)
			}
		}
	})
}

func walk(v any, key string, f func(string, any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			walk(e, strings.TrimPrefix(key+"."+k, "."), f)
		}
	case []any:
		for i, e := range v {
			walk(e, fmt.Sprintf("%s[%d]", key, i), f)
		}
	default:
		f(key, v)
	}
}

// at reads a nested value of a resolved configuration.
func at(raw map[string]any, keys ...string) any {
	var v any = raw
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
