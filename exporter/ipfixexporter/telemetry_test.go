package ipfixexporter

import (
	"testing"

	"github.com/flowtel/flowtel/internal/configtest"
)

// Every attribute value the exporter records is declared in metadata.yaml.
func TestAttributeValuesAreDeclared(t *testing.T) {
	configtest.Enum(t, "failure_reason", reasonDecode, reasonEncode, reasonTooLarge)
	configtest.Enum(t, "loss_reason", reasonConnectionLost)
	configtest.Enum(t, "result", resultOKValue, resultFailedValue)
}
