package clickhouseflowsexporter

import (
	"testing"

	"github.com/flowtel/flowtel/internal/configtest"
)

// Every attribute value the exporter records is declared in metadata.yaml.
func TestAttributeValuesAreDeclared(t *testing.T) {
	configtest.Enum(t, "failure_reason", reasonDecode)
	configtest.Enum(t, "insert_failure_reason", reasonConnection, reasonServer, reasonTimeout, reasonSchema)
}
