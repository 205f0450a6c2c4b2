package configcheck

import (
	"errors"
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	prior := errors.New("an earlier error")
	for _, tc := range []struct {
		name string
		errs []error
		want []string
	}{
		{"positive count", Positive([]error{prior}, "limits.max_streams", 1, "set a bound"), []string{"an earlier error"}},
		{"positive duration", Positive(nil, "ttl", time.Nanosecond, ""), nil},
		{"zero count, hint", Positive([]error{prior}, "ipfix.max_templates", 0, "set a bound such as 20000"),
			[]string{"an earlier error", "ipfix.max_templates: must be positive (got 0); set a bound such as 20000"}},
		{"negative duration, no hint", Positive(nil, "history.query_timeout", -90*time.Second, ""),
			[]string{"history.query_timeout: must be positive (got -1m30s)"}},
		{"zero duration", Positive(nil, "cache_ttl", time.Duration(0), "set a duration such as 1m0s"),
			[]string{"cache_ttl: must be positive (got 0s); set a duration such as 1m0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.errs) != len(tc.want) {
				t.Fatalf("got %d errors %v, want %q", len(tc.errs), tc.errs, tc.want)
			}
			for i, err := range tc.errs {
				if err.Error() != tc.want[i] {
					t.Errorf("error %d = %q, want %q", i, err, tc.want[i])
				}
			}
		})
	}
}
