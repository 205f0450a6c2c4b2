package images

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// ChartImage is the image reference the Helm chart (deploy/helm/flowtel)
// renders for a distribution: <values>.image.repository and tag, the tag
// defaulting to the chart's appVersion, as the chart's flowtel.image helper
// does. An image imported under this name is the one the chart's Pods run.
//
// The full distribution has no image in the chart (nor in the kustomize base
// or the operator's resources); it is named as the node image's repository
// with its own name, e.g. ghcr.io/flowtel/flowtel:0.1.0.
func ChartImage(repoRoot, dist string) (string, error) {
	chartDir := filepath.Join(repoRoot, "deploy", "helm", "flowtel")
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	type image struct {
		Repository string `yaml:"repository"`
		Tag        string `yaml:"tag"`
	}
	type component struct {
		Image image `yaml:"image"`
	}
	var values struct {
		Node    component `yaml:"node"`
		Gateway component `yaml:"gateway"`
	}
	if err := readYAML(filepath.Join(chartDir, "Chart.yaml"), &chart); err != nil {
		return "", err
	}
	if err := readYAML(filepath.Join(chartDir, "values.yaml"), &values); err != nil {
		return "", err
	}
	var img image
	switch dist {
	case "flowtel-node":
		img = values.Node.Image
	case "flowtel-gateway":
		img = values.Gateway.Image
	case "flowtel":
		img = image{Repository: path.Join(path.Dir(values.Node.Image.Repository), dist)}
	default:
		return "", fmt.Errorf("distribution %q: no image in the chart", dist)
	}
	if img.Repository == "" || img.Repository == dist {
		return "", fmt.Errorf("%s: no image repository for %s", chartDir, dist)
	}
	tag := img.Tag
	if tag == "" {
		tag = chart.AppVersion
	}
	if tag == "" || tag == "latest" {
		// The kubelet always pulls :latest, which the testbed cannot.
		return "", fmt.Errorf("%s: image %s has tag %q; want a version", chartDir, img.Repository, tag)
	}
	return img.Repository + ":" + tag, nil
}

func readYAML(file string, v any) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
