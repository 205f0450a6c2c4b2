// Package images builds the container images of the Kubernetes testbed without
// a container engine: the machines that run it have containerd but no Docker,
// and a build daemon would be one more thing to install and keep running.
//
// A flowtel image is read from its distribution's Dockerfile (FromDockerfile),
// so the Dockerfile stays the one description of what is in the image: the
// builder understands the few instructions a FROM scratch stage of a static
// binary needs and fails, naming the line, on any other. The testbed's own
// programs (the sandbox, the traffic tool) are built from Go packages (Pause,
// BuildGoImage). Each image is one layer, written as a docker-archive tar (WriteDockerArchive, Save)
// that `ctr images import` loads into the containerd of a kubelet (Import).
//
// In a test, after `make build`:
//
//	dir := t.TempDir()
//	node, err := images.FromDockerfile(images.RepoRoot(), "flowtel-node")
//	pause, err := images.Pause(ctx, dir) // PauseImageName: containerd's sandbox_image
//	var tars []string
//	for _, img := range []images.Image{node, pause} {
//		p, err := images.Save(dir, img)
//		tars = append(tars, p)
//	}
//	err = images.Import(ctx, "/run/containerd/containerd.sock", tars...)
package images

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Image is a one-layer image: the files to copy in and the configuration the
// container runtime reads.
type Image struct {
	// Name is the reference the image is imported as, the one the manifests
	// name (e.g. ghcr.io/flowtel/flowtel-node:0.1.0), so a kubelet finds it
	// without pulling. Never a :latest tag: for those the kubelet's default
	// pull policy is Always.
	Name         string
	Files        []File
	Entrypoint   []string
	Cmd          []string
	User         string   // as in USER, e.g. "0:0"; empty is root
	ExposedPorts []string // "port/proto", e.g. "4317/tcp"
	Env          []string // "KEY=value"
	WorkingDir   string   // absolute; created in the image
}

// File is a regular file of the image.
type File struct {
	Path   string // absolute path in the image
	Source string // the file on this machine; its permission bits are kept
}

// RepoRoot is the root of the flowtel checkout this package is compiled from.
func RepoRoot() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..")
}

// Save writes img as a docker-archive into dir and returns the file's path.
func Save(dir string, img Image) (string, error) {
	name := strings.NewReplacer("/", "_", ":", "_").Replace(img.Name) + ".tar"
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		return "", err
	}
	if err := WriteDockerArchive(f, img); err != nil {
		f.Close()
		return "", err
	}
	return p, f.Close()
}

// epoch is the modification time of every entry: the archive of the same
// files is then the same bytes, so re-importing it changes nothing.
var epoch = time.Unix(0, 0)

// WriteDockerArchive writes img in the format of `docker save` (what `ctr
// images import` and `docker load` read): manifest.json naming the image,
// its configuration, and one uncompressed layer.tar.
func WriteDockerArchive(w io.Writer, img Image) error {
	if img.Name == "" {
		return fmt.Errorf("image has no name")
	}
	// The configuration names the layer by its digest, which is known only
	// once the layer is written: write it once to hash it, then again into the
	// archive. Its files are read twice rather than held in memory (the
	// collectors are ~90 MB); the second pass is checked against the first.
	first := sha256.New()
	size, err := writeLayer(first, img)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Name, err)
	}
	diffID := hex.EncodeToString(first.Sum(nil))

	config, err := configJSON(img, diffID)
	if err != nil {
		return err
	}
	configName := fmt.Sprintf("%x.json", sha256.Sum256(config))
	layerName := diffID + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{img.Name},
		"Layers":   []string{layerName},
	}})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(dirHeader(diffID + "/")); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: layerName, Mode: 0o644, Size: size, ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	second := sha256.New()
	if _, err := writeLayer(io.MultiWriter(tw, second), img); err != nil {
		return fmt.Errorf("image %s: %w", img.Name, err)
	}
	if hex.EncodeToString(second.Sum(nil)) != diffID {
		return fmt.Errorf("image %s: a file changed while the layer was written", img.Name)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, config}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// configJSON is the image configuration (the OCI image config, which Docker's
// is a superset of) for the host's platform: the binaries copied in are the
// ones built here, and ctr unpacks only images of its own platform.
func configJSON(img Image, diffID string) ([]byte, error) {
	ports := map[string]struct{}{}
	for _, p := range img.ExposedPorts {
		ports[p] = struct{}{}
	}
	type runConfig struct {
		User         string              `json:"User,omitempty"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
		Env          []string            `json:"Env,omitempty"`
		Entrypoint   []string            `json:"Entrypoint,omitempty"`
		Cmd          []string            `json:"Cmd,omitempty"`
		WorkingDir   string              `json:"WorkingDir,omitempty"`
	}
	return json.Marshal(struct {
		Architecture string    `json:"architecture"`
		OS           string    `json:"os"`
		Config       runConfig `json:"config"`
		RootFS       struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config:       runConfig{img.User, ports, img.Env, img.Entrypoint, img.Cmd, img.WorkingDir},
		RootFS: struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		}{"layers", []string{"sha256:" + diffID}},
	})
}

// writeLayer writes the image's file system as a tar to w and returns its
// size: every file, owned by root as COPY makes them, and each parent
// directory (and the working directory), 0755 as a builder creates them.
func writeLayer(w io.Writer, img Image) (int64, error) {
	files := map[string]string{} // tar name -> source
	dirs := map[string]bool{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			dirs[d[1:]+"/"] = true
		}
	}
	for _, f := range img.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return 0, fmt.Errorf("file path %q: want a clean absolute path", f.Path)
		}
		files[f.Path[1:]] = f.Source
		addParents(f.Path)
	}
	if wd := path.Clean(img.WorkingDir); img.WorkingDir != "" && wd != "/" {
		dirs[wd[1:]+"/"] = true
		addParents(wd)
	}
	var names []string
	for d := range dirs {
		if _, ok := files[strings.TrimSuffix(d, "/")]; ok {
			return 0, fmt.Errorf("/%s is both a file and a directory", strings.TrimSuffix(d, "/"))
		}
		names = append(names, d)
	}
	for f := range files {
		names = append(names, f)
	}
	// Sorted, so a directory comes before what is in it and the bytes do not
	// depend on map order.
	slices.Sort(names)

	cw := &countWriter{w: w}
	tw := tar.NewWriter(cw)
	for _, name := range names {
		if dirs[name] {
			if err := tw.WriteHeader(dirHeader(name)); err != nil {
				return 0, err
			}
			continue
		}
		if err := copyFile(tw, name, files[name]); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

func dirHeader(name string) *tar.Header {
	return &tar.Header{Name: name, Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir}
}

func copyFile(tw *tar.Writer, name, source string) error {
	f, err := os.Open(source)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (the builder copies files only)", source)
	}
	hdr := &tar.Header{Name: name, Mode: int64(st.Mode().Perm()), Size: st.Size(), ModTime: epoch, Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	if n != st.Size() {
		return fmt.Errorf("%s: changed size while copied", source)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
