package distributions

import (
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/encoding"
	"gopkg.in/yaml.v3"
)

const grpcgzipPkg = "github.com/flowtel/flowtel/internal/grpcgzip"

// Every flowtel component links internal/grpcgzip (decision D14), so a
// collector built with any one of them, as a user's OCB build may be, sends
// and reads gRPC gzip with it; and in a process with all of them it is the
// registered "gzip" compressor.
func TestEveryComponentLinksFasterGzip(t *testing.T) {
	c := encoding.GetCompressor("gzip")
	require.NotNil(t, c)
	assert.Equal(t, grpcgzipPkg, reflect.TypeOf(c).Elem().PkgPath(), "gRPC's gzip compressor")

	var ours []string
	for _, name := range Names() {
		raw, err := os.ReadFile(Manifest(name))
		require.NoError(t, err)
		var m manifest
		require.NoError(t, yaml.Unmarshal(raw, &m))
		for _, list := range [][]module{m.Receivers, m.Processors, m.Exporters, m.Extensions, m.Connectors} {
			for _, mod := range list {
				if p := mod.importPath(); strings.HasPrefix(p, "github.com/flowtel/flowtel/") && !slices.Contains(ours, p) {
					ours = append(ours, p)
				}
			}
		}
	}
	require.NotEmpty(t, ours)
	for _, pkg := range ours {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		require.NoError(t, err, "go list -deps %s", pkg)
		assert.Contains(t, strings.Fields(string(out)), grpcgzipPkg, "%s does not import %s", pkg, grpcgzipPkg)
	}
}
