// Package configcheck holds the checks that the components' Validate methods
// make alike, so that a setting breaking the same rule is refused in the same
// words in every component: "<key>: must be positive (got <value>); <hint>".
package configcheck // import "github.com/flowtel/flowtel/internal/configcheck"

import (
	"errors"
	"fmt"
)

// Positive appends to errs, when v is not above zero, the error
// "<key>: must be positive (got <v>)", followed by "; <hint>" when hint is not
// empty, and returns errs. key is the setting's path in the configuration
// (such as ipfix.template_ttl); a duration is printed as time.Duration prints
// itself (30m0s), a count as a decimal number.
func Positive[T ~int | ~int64](errs []error, key string, v T, hint string) []error {
	if v > 0 {
		return errs
	}
	msg := fmt.Sprintf("%s: must be positive (got %v)", key, v)
	if hint != "" {
		msg += "; " + hint
	}
	return append(errs, errors.New(msg))
}
