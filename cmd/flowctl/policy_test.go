package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flowctl policy's flags, refused before anything is reached.
func TestPolicyFlags(t *testing.T) {
	ctx := context.Background()
	_, errOut, code := flowctl(ctx, "policy")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "what-if")
	_, errOut, code = flowctl(ctx, "policy", "maybe")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown command "maybe"`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"what-if", "--clickhouse", "http://127.0.0.1:1"}, "-f: the draft is required"},
		{[]string{"what-if", "-f", "x.yaml"}, "--clickhouse: required"},
		{[]string{"what-if", "-f", "x.yaml", "-o", "yaml", "--clickhouse", "http://127.0.0.1:1"}, `-o: "yaml" is not table or json`},
		{[]string{"recommend", "--isolation", "some"}, `--isolation: "some" is not applied or all`},
		{[]string{"recommend", "--clickhouse", "http://127.0.0.1:1", "--since", "a week"}, "--since"},
	} {
		_, errOut, code := flowctl(ctx, append([]string{"policy"}, c.args...)...)
		assert.Equal(t, 1, code, "%v", c.args)
		assert.Contains(t, errOut, c.want, "%v", c.args)
	}
}

func TestPolicyScope(t *testing.T) {
	ns, err := scopeNamespace(&scopeFlags{}, "shop")
	require.NoError(t, err)
	assert.Equal(t, "shop", ns, "the context's Namespace")
	ns, err = scopeNamespace(&scopeFlags{clusterWide: true}, "shop")
	require.NoError(t, err)
	assert.Empty(t, ns)
	_, err = scopeNamespace(&scopeFlags{clusterWide: true, namespace: "a"}, "")
	assert.ErrorContains(t, err, "exclude each other")
	_, err = scopeNamespace(&scopeFlags{namespace: "a' OR 1=1 --"}, "")
	assert.ErrorContains(t, err, "is not a Namespace name", "the name goes into the query: only a DNS label")

	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	from, err := parseSince("7d", now)
	require.NoError(t, err)
	assert.Equal(t, now.AddDate(0, 0, -7), from)
	from, err = parseSince("90m", now)
	require.NoError(t, err)
	assert.Equal(t, now.Add(-90*time.Minute), from)
}
