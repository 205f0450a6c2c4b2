package controlplane

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// InstallPolicyAPI creates the network-policy-api's AdminNetworkPolicy and
// BaselineAdminNetworkPolicy CRDs (network-policy-api-crds.yaml beside this
// file) and waits until discovery serves both resources.
func (cp *ControlPlane) InstallPolicyAPI(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cp.Config(cp.AdminToken))
	must(t, err)
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	_, self, _, _ := runtime.Caller(0)
	f, err := os.Open(filepath.Join(filepath.Dir(self), "network-policy-api-crds.yaml"))
	must(t, err)
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else {
			must(t, err)
		}
		_, err := crds.Create(ctx, &obj, metav1.CreateOptions{})
		must(t, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		list, err := cp.Admin.Discovery().ServerResourcesForGroupVersion("policy.networking.k8s.io/v1alpha1")
		if err == nil {
			var names []string
			for _, r := range list.APIResources {
				names = append(names, r.Name)
			}
			if slices.Contains(names, "adminnetworkpolicies") && slices.Contains(names, "baselineadminnetworkpolicies") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the network-policy-api is not served 5s after creating its CRDs (last error: %v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
