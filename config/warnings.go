package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Warning is something an operator should know that does not stop the
// config from working: a setting that is ignored, dropped or inferred.
type Warning struct {
	// Field is the path of the field concerned: an AgentConfiguration path
	// (network.vxlan) for validation warnings, the source file's path
	// (winkernel.rootHnsEndpointName, Backend.GBP) for import warnings.
	Field string
	// Message says what happens and, where useful, what to do.
	Message string
}

// String renders the warning as "field: message".
func (w Warning) String() string {
	return w.Field + ": " + w.Message
}

// Warnings is the list of warnings of one load, in the order found.
type Warnings []Warning

// Strings renders every warning with String.
func (ws Warnings) Strings() []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}

func (ws *Warnings) add(path *field.Path, format string, args ...any) {
	*ws = append(*ws, Warning{Field: path.String(), Message: fmt.Sprintf(format, args...)})
}
