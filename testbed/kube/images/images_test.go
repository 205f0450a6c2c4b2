package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What each distribution's Dockerfile says its image is. A new distribution
// directory with a Dockerfile fails the test until it is listed here.
func TestFromDockerfile(t *testing.T) {
	root := RepoRoot()
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	require.NoError(t, readYAML(filepath.Join(root, "deploy/helm/flowtel/Chart.yaml"), &chart))
	certs := File{Path: "/etc/ssl/certs/ca-certificates.crt", Source: "/etc/ssl/certs/ca-certificates.crt"}
	config := []string{"--config=/etc/flowtel/config.yaml"}
	want := map[string]Image{
		"flowtel": {
			Name:         "ghcr.io/flowtel/flowtel:" + chart.AppVersion,
			User:         "0:0",
			ExposedPorts: []string{"4317/tcp", "13133/tcp", "8888/tcp"},
		},
		"flowtel-node": {
			Name:         "ghcr.io/flowtel/flowtel-node:" + chart.AppVersion,
			User:         "0:0",
			ExposedPorts: []string{"13133/tcp"},
		},
		"flowtel-gateway": {
			Name:         "ghcr.io/flowtel/flowtel-gateway:" + chart.AppVersion,
			User:         "10001:10001",
			ExposedPorts: []string{"4317/tcp", "13133/tcp", "8888/tcp"},
		},
	}
	dockerfiles, err := filepath.Glob(filepath.Join(root, "distributions", "*", "Dockerfile"))
	require.NoError(t, err)
	require.Len(t, dockerfiles, len(want), "distributions with a Dockerfile: %v", dockerfiles)
	for _, df := range dockerfiles {
		dist := filepath.Base(filepath.Dir(df))
		t.Run(dist, func(t *testing.T) {
			w, ok := want[dist]
			require.True(t, ok, "no expectation for distribution %s", dist)
			w.Entrypoint = []string{"/" + dist}
			w.Cmd = config
			w.Files = []File{
				certs,
				{Path: "/" + dist, Source: filepath.Join(root, "_build", dist, dist)},
				{Path: "/etc/flowtel/config.yaml", Source: filepath.Join(root, "distributions", dist, "config.yaml")},
			}
			got, err := FromDockerfile(root, dist)
			require.NoError(t, err)
			assert.Equal(t, w, got)
		})
	}
}

// The builder refuses what it does not implement, naming the line, rather
// than build another image than the Dockerfile describes.
func TestDockerfileRefusals(t *testing.T) {
	for _, tc := range []struct{ name, dockerfile, want string }{
		{"unknown instruction", "FROM scratch\nCOPY a /a\n# comment\n\nHEALTHCHECK NONE\n", "Dockerfile:5: HEALTHCHECK: instruction not supported"},
		{"RUN", "FROM debian:12-slim AS x\nRUN true\nFROM scratch\nRUN true\n", "Dockerfile:4: RUN: instruction not supported"},
		{"continued line", "FROM scratch\nLABEL a=b \\\n  c=d\n", "Dockerfile:2: LABEL"},
		{"final base", "FROM scratch AS a\nFROM alpine\n", "Dockerfile:2: FROM: the final stage must be FROM scratch"},
		{"shell form", "FROM scratch\nENTRYPOINT /x --y\n", "Dockerfile:2: ENTRYPOINT: want the exec form"},
		{"variable", "FROM scratch\nUSER $UID\n", "Dockerfile:2: USER: variable substitution"},
		{"copy option", "FROM scratch\nCOPY --chown=1:1 a /a\n", "Dockerfile:2: COPY: option --chown=1:1 not supported"},
		{"unknown stage", "FROM scratch\nCOPY --from=certs /x /x\n", "--from=certs is not an earlier stage"},
		{"stage file", "FROM debian:12-slim AS certs\nFROM scratch\nCOPY --from=certs /etc/passwd /etc/passwd\n", "Dockerfile:3: COPY: --from=certs (debian:12-slim): the builder knows no stand-in for /etc/passwd"},
		{"outside context", "FROM scratch\nCOPY ../x /x\n", "outside the build context"},
		{"wildcard", "FROM scratch\nCOPY *.yaml /etc/\n", "wildcard"},
		{"port", "FROM scratch\nEXPOSE 80/http\n", "Dockerfile:2: EXPOSE: want port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDockerfile("Dockerfile", tc.dockerfile, "/context")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDockerfileInstructions(t *testing.T) {
	img, err := parseDockerfile("Dockerfile", `# syntax=docker/dockerfile:1
FROM --platform=linux/amd64 debian:12-slim AS certs
RUN anything: earlier stages are not built
FROM scratch AS final
COPY --from=certs /etc/ssl/certs/ca-certificates.crt /certs.pem
WORKDIR /app
COPY bin/a \
  # a comment inside a continuation
  bin/b ./
COPY conf.yaml etc/
copy conf.yaml /conf.yaml
COPY other.yaml /conf.yaml
ENV A=1 B="two words"
ENV C 3 and more
ENV A=replaced
EXPOSE 80 53/udp
user nobody
ENTRYPOINT ["/app/a", \
  "--flag"]
CMD ["x"]
`, "/ctx")
	require.NoError(t, err)
	assert.Equal(t, Image{
		Files: []File{
			{Path: "/certs.pem", Source: "/etc/ssl/certs/ca-certificates.crt"},
			{Path: "/app/a", Source: "/ctx/bin/a"},
			{Path: "/app/b", Source: "/ctx/bin/b"},
			{Path: "/app/etc/conf.yaml", Source: "/ctx/conf.yaml"},
			{Path: "/conf.yaml", Source: "/ctx/other.yaml"},
		},
		Entrypoint:   []string{"/app/a", "--flag"},
		Cmd:          []string{"x"},
		User:         "nobody",
		ExposedPorts: []string{"80/tcp", "53/udp"},
		Env:          []string{"B=two words", "C=3 and more", "A=replaced"},
		WorkingDir:   "/app",
	}, img)
}

// The kustomize base and the operator's resources run the images the chart
// names: one name per image, whichever way flowtel is deployed.
func TestManifestsNameTheChartImages(t *testing.T) {
	root := RepoRoot()
	chart := map[string]bool{}
	for _, dist := range []string{"flowtel-node", "flowtel-gateway"} {
		name, err := ChartImage(root, dist)
		require.NoError(t, err)
		chart[name] = true
	}
	imageLine := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)\s*$`)
	for _, dir := range []string{"deploy/kubernetes/base", "deploy/operator"} {
		seen := map[string]bool{}
		require.NoError(t, filepath.Walk(filepath.Join(root, dir), func(p string, fi os.FileInfo, err error) error {
			if err != nil || !strings.HasSuffix(p, ".yaml") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range imageLine.FindAllStringSubmatch(string(b), -1) {
				assert.True(t, chart[m[1]], "%s: image %s is not one the chart names (%v)", p, m[1], chart)
				seen[m[1]] = true
			}
			return nil
		}))
		assert.Equal(t, chart, seen, "%s: the images it runs", dir)
	}
	// kustomize rewrites image tags with images: newTag.
	var k struct {
		Images []struct {
			Name   string `yaml:"name"`
			NewTag string `yaml:"newTag"`
		} `yaml:"images"`
	}
	require.NoError(t, readYAML(filepath.Join(root, "deploy/kubernetes/base/kustomization.yaml"), &k))
	for _, i := range k.Images {
		assert.True(t, chart[i.Name+":"+i.NewTag], "kustomization images: %s:%s", i.Name, i.NewTag)
	}
}

func TestWriteDockerArchive(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin"), []byte("#!binary"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "conf"), []byte("a: 1\n"), 0o640))
	img := Image{
		Name:         "example.test/x:1",
		Files:        []File{{Path: "/x", Source: filepath.Join(dir, "bin")}, {Path: "/etc/x/conf.yaml", Source: filepath.Join(dir, "conf")}},
		Entrypoint:   []string{"/x"},
		Cmd:          []string{"--c"},
		User:         "1:2",
		ExposedPorts: []string{"80/tcp", "53/udp"},
		Env:          []string{"A=1"},
		WorkingDir:   "/work/dir",
	}
	var buf bytes.Buffer
	require.NoError(t, WriteDockerArchive(&buf, img))
	var again bytes.Buffer
	require.NoError(t, WriteDockerArchive(&again, img))
	assert.Equal(t, buf.Bytes(), again.Bytes(), "the same image, the same bytes")

	entries := readTar(t, buf.Bytes())
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	require.NoError(t, json.Unmarshal(entries["manifest.json"].data, &manifest))
	require.Len(t, manifest, 1)
	assert.Equal(t, []string{"example.test/x:1"}, manifest[0].RepoTags)
	require.Len(t, manifest[0].Layers, 1)

	config := entries[manifest[0].Config].data
	assert.Equal(t, fmt.Sprintf("%x.json", sha256.Sum256(config)), manifest[0].Config, "config named by its digest")
	var cfg struct {
		Architecture, OS string
		Config           struct {
			User         string
			ExposedPorts map[string]struct{}
			Env          []string
			Entrypoint   []string
			Cmd          []string
			WorkingDir   string
		}
		RootFS struct {
			Type    string
			DiffIDs []string `json:"diff_ids"`
		}
	}
	require.NoError(t, json.Unmarshal(config, &cfg))
	assert.Equal(t, runtime.GOARCH, cfg.Architecture)
	assert.Equal(t, "linux", cfg.OS)
	assert.Equal(t, "1:2", cfg.Config.User)
	assert.Equal(t, map[string]struct{}{"80/tcp": {}, "53/udp": {}}, cfg.Config.ExposedPorts)
	assert.Equal(t, []string{"A=1"}, cfg.Config.Env)
	assert.Equal(t, []string{"/x"}, cfg.Config.Entrypoint)
	assert.Equal(t, []string{"--c"}, cfg.Config.Cmd)
	assert.Equal(t, "/work/dir", cfg.Config.WorkingDir)
	layer := entries[manifest[0].Layers[0]].data
	assert.Equal(t, "layers", cfg.RootFS.Type)
	assert.Equal(t, []string{fmt.Sprintf("sha256:%x", sha256.Sum256(layer))}, cfg.RootFS.DiffIDs)

	files := readTar(t, layer)
	modes := map[string]int64{}
	for name, e := range files {
		modes[name] = e.hdr.Mode
		assert.Zero(t, e.hdr.Uid, name)
		assert.Zero(t, e.hdr.Gid, name)
	}
	assert.Equal(t, map[string]int64{
		"etc/": 0o755, "etc/x/": 0o755, "etc/x/conf.yaml": 0o640,
		"work/": 0o755, "work/dir/": 0o755,
		"x": 0o755,
	}, modes)
	assert.Equal(t, "#!binary", string(files["x"].data))
	assert.Equal(t, byte(tar.TypeDir), files["etc/"].hdr.Typeflag)
}

func TestWriteDockerArchiveMissingFile(t *testing.T) {
	err := WriteDockerArchive(io.Discard, Image{Name: "x.test/x:1", Files: []File{{Path: "/x", Source: "/nonexistent/x"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/x")
}

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

func readTar(t *testing.T, b []byte) map[string]tarEntry {
	t.Helper()
	out := map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		out[hdr.Name] = tarEntry{hdr, data}
	}
}
