package images

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
)

// Names of the testbed's own images. The registry flowtel.test is under the
// reserved .test domain, so a kubelet that tried to pull one (the image was
// not imported on its Node) fails at once instead of fetching something else.
// Versioned tags, not :latest, so the default pull policy is IfNotPresent.
const (
	// PauseImageName is the sandbox ("pause") image: the containerd
	// configuration of the testbed's Nodes names it as sandbox_image.
	PauseImageName = "flowtel.test/testbed/pause:1"
)

const module = "github.com/flowtel/flowtel"

// BuildGoImage builds the Go main package pkg (an import path in flowtel's
// module) as a static binary into outDir and returns an image named name that
// holds only that binary, /<last element of pkg>, as its entry point.
// CGO_ENABLED=0: the image has no C library to link against.
func BuildGoImage(ctx context.Context, outDir, pkg, name string) (Image, error) {
	bin := path.Base(pkg)
	out := filepath.Join(outDir, bin)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return Image{}, fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return Image{Name: name, Files: []File{{Path: "/" + bin, Source: out}}, Entrypoint: []string{"/" + bin}}, nil
}

// Pause builds the sandbox image (cmd/pause) into outDir. It runs as
// 65535:65535 like the upstream pause image: it needs no privilege.
func Pause(ctx context.Context, outDir string) (Image, error) {
	img, err := BuildGoImage(ctx, outDir, module+"/testbed/kube/images/cmd/pause", PauseImageName)
	if err != nil {
		return Image{}, err
	}
	img.User = "65535:65535"
	return img, nil
}
