package images

import (
	"context"
	"fmt"
	"os/exec"
)

// Namespace is the containerd namespace of the CRI plugin: images the
// kubelet can run must be there.
const Namespace = "k8s.io"

// Import loads docker-archive tarballs (Save) into the containerd listening on
// the socket ctrAddress, in Namespace, with the ctr client. The images are
// unpacked (--no-unpack=false, ctr's default, spelled out because a kubelet
// cannot start a container from an image that is not) for the host platform,
// into the default snapshotter or the one $CONTAINERD_SNAPSHOTTER names; that
// must be the CRI plugin's snapshotter.
func Import(ctx context.Context, ctrAddress string, tarPaths ...string) error {
	for _, p := range tarPaths {
		cmd := exec.CommandContext(ctx, "ctr", "--address", ctrAddress, "--namespace", Namespace,
			"images", "import", "--no-unpack=false", p)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("ctr images import %s: %w\n%s", p, err, out)
		}
	}
	return nil
}
