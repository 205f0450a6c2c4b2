//go:build integration

package deploy_test

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/flowtel/flowtel/distributions"
)

// Each distribution's Dockerfile copies the binary its OCB manifest builds
// (output_path/name), runs it as the entry point with the distribution's
// default configuration, and runs as root only for the distributions that
// read conntrack. There is no container engine on the CI machines, so this
// checks the Dockerfiles against the build rather than building them.
func TestDockerfilesMatchTheBuild(t *testing.T) {
	root := repoRoot()
	wantRoot := map[string]bool{distributions.Full: true, distributions.Node: true, distributions.Gateway: false}
	for _, dist := range distributions.Names() {
		t.Run(dist, func(t *testing.T) {
			var m struct {
				Dist struct {
					Name       string `yaml:"name"`
					OutputPath string `yaml:"output_path"`
				} `yaml:"dist"`
			}
			b, err := os.ReadFile(distributions.Manifest(dist))
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			binary := path.Join(path.Clean(m.Dist.OutputPath), m.Dist.Name)
			df, err := os.ReadFile(filepath.Join(root, "distributions", dist, "Dockerfile"))
			if err != nil {
				t.Fatal(err)
			}
			text := string(df)
			for _, want := range []string{
				"COPY " + binary + " /" + m.Dist.Name + "\n",
				`ENTRYPOINT ["/` + m.Dist.Name + `"]`,
				"COPY distributions/" + dist + "/config.yaml /etc/flowtel/config.yaml\n",
				`CMD ["--config=/etc/flowtel/config.yaml"]`,
			} {
				if !strings.Contains(text, want) {
					t.Errorf("Dockerfile lacks %q", want)
				}
			}
			if _, err := os.Stat(filepath.Join(root, "distributions", dist, "config.yaml")); err != nil {
				t.Error(err)
			}
			// The final stage: FROM scratch, and its USER.
			stages := strings.Split(text, "\nFROM ")
			final := stages[len(stages)-1]
			if !strings.HasPrefix(final, "scratch\n") {
				t.Errorf("final stage is FROM %s, want scratch (a static binary needs nothing else)", strings.SplitN(final, "\n", 2)[0])
			}
			user := regexp.MustCompile(`(?m)^USER (\S+)$`).FindStringSubmatch(final)
			if user == nil {
				t.Fatal("final stage sets no USER")
			}
			isRoot := strings.HasPrefix(user[1], "0:") || user[1] == "0" || user[1] == "root"
			if isRoot != wantRoot[dist] {
				t.Errorf("USER %s; root wanted: %v (only conntrack readers run as root)", user[1], wantRoot[dist])
			}
		})
	}
}
