package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/flowtel/flowtel/distributions"
	"github.com/flowtel/flowtel/testbed/kube/images"
)

// PeerImage is the traffic tool's image (testbed/cmd/flowpeer): servers in
// workload Pods, clients through kubectl exec.
const PeerImage = "flowtel.test/testbed/flowpeer:1"

// BedImages are the image tarballs a test cluster imports on every Node.
type BedImages struct {
	// Tarballs: the three distributions (from _build/, as their Dockerfiles
	// say), the sandbox image and PeerImage.
	Tarballs []string
	// Flowpeer is the traffic tool's binary, for hosts outside the cluster.
	Flowpeer string
}

var bedImages struct {
	once sync.Once
	imgs BedImages
	err  error
}

// Images builds the bed's images once per test binary and sets SandboxImage.
func Images() (BedImages, error) {
	bedImages.once.Do(func() {
		bedImages.imgs, bedImages.err = buildImages(context.Background())
	})
	SandboxImage = images.PauseImageName
	return bedImages.imgs, bedImages.err
}

func buildImages(ctx context.Context) (BedImages, error) {
	var b BedImages
	dir, err := os.MkdirTemp("", "flowtel-images-")
	if err != nil {
		return b, err
	}
	var imgs []images.Image
	for _, dist := range distributions.Names() {
		img, err := images.FromDockerfile(images.RepoRoot(), dist)
		if err != nil {
			return b, fmt.Errorf("the %s image: %w (`make build` builds its binary)", dist, err)
		}
		imgs = append(imgs, img)
	}
	pause, err := images.Pause(ctx, dir)
	if err != nil {
		return b, err
	}
	peer, err := images.BuildGoImage(ctx, dir, "github.com/flowtel/flowtel/testbed/cmd/flowpeer", PeerImage)
	if err != nil {
		return b, err
	}
	b.Flowpeer = filepath.Join(dir, "flowpeer")
	for _, img := range append(imgs, pause, peer) {
		p, err := images.Save(dir, img)
		if err != nil {
			return b, err
		}
		b.Tarballs = append(b.Tarballs, p)
	}
	return b, nil
}
