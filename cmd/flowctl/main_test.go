package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

func TestUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "Commands:"},
		{[]string{"watch"}, 2, `unknown command "watch"`},
		{[]string{"observe", "--nope"}, 2, "unknown flag: --nope"},
		{[]string{"observe", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"observe", "-o", "yaml"}, 1, `-o: "yaml" is not table, json or jsonl`},
		{[]string{"observe", "--flow-type", "sideways"}, 1, `--flow-type: "sideways" is not`},
		{[]string{"observe", "--direction", "up"}, 1, `--direction: "up" is not both, from or to`},
		{[]string{"observe", "--ip", "10.0.0/8"}, 1, `--ip: "10.0.0/8" is not an IP address or CIDR`},
		{[]string{"observe", "--since", "yesterday"}, 1, `--since: "yesterday" is neither a duration`},
		{[]string{"observe", "--last", "3", "-f"}, 1, "--last and -f exclude each other"},
		{[]string{"records", "--srcip", "host"}, 1, `--srcip: "host" is not an IP address`},
		{[]string{"records", "--proto", "gre2"}, 1, `--proto: "gre2" is not a protocol name or number`},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tt.args, &out, &errOut)
		assert.Equal(t, tt.code, code, "%v", tt.args)
		assert.Contains(t, errOut.String(), tt.msg, "%v", tt.args)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	got, err := parseSince("90s", now)
	require.NoError(t, err)
	require.Equal(t, now.Add(-90*time.Second), got)
	got, err = parseSince("2026-12-02T11:00:00Z", now)
	require.NoError(t, err)
	require.Equal(t, now.Add(-time.Hour), got)
	got, err = parseSince("7d", now)
	require.NoError(t, err)
	require.Equal(t, now.Add(-7*24*time.Hour), got)
	got, err = parseSince("1d12h", now)
	require.NoError(t, err)
	require.Equal(t, now.Add(-36*time.Hour), got)
	for _, bad := range []string{"d", "xd", "7days", "-1d"} {
		_, err = parseSince(bad, now)
		require.ErrorContains(t, err, "is neither a duration (5m, 24h, 7d) nor an RFC 3339 time", bad)
	}
}

func TestEndpointMarks(t *testing.T) {
	ip := []byte{10, 0, 0, 1}
	assert.Equal(t, "ns/web 10.0.0.1:80", endpoint(ip, 80, "ns", "web", pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_UNSPECIFIED))
	assert.Equal(t, "ns/db 10.0.0.1:80 [identity]", endpoint(ip, 80, "ns", "db", pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY))
	assert.Equal(t, "ns/? 10.0.0.1:80 [redacted]", endpoint(ip, 80, "ns", "", pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW))
	assert.Equal(t, "10.0.0.1:80 [redacted]", endpoint(ip, 80, "", "", pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW))
	assert.Equal(t, "dropped", verdict(&pb.Kubernetes{IngressNetworkPolicyRuleAction: pb.NetworkPolicyRuleAction_NETWORK_POLICY_RULE_ACTION_DROP}))
	assert.Equal(t, "allowed", verdict(&pb.Kubernetes{}))
}

func TestParseExposition(t *testing.T) {
	got, err := parseExposition(strings.NewReader(`# HELP otelcol_exporter_sent_log_records x
# TYPE otelcol_exporter_sent_log_records counter
otelcol_exporter_sent_log_records{exporter="ipfix",note="a \"quoted\", value"} 12
otelcol_process_uptime 3.5 1700000000000
`))
	require.NoError(t, err)
	require.Equal(t, []series{
		{Name: "otelcol_exporter_sent_log_records", Labels: map[string]string{"exporter": "ipfix", "note": `a "quoted", value`}, Value: 12},
		{Name: "otelcol_process_uptime", Value: 3.5},
	}, got)
	_, err = parseExposition(strings.NewReader("broken{a=\"b\" 1\n"))
	require.ErrorContains(t, err, "line 1")
	_, err = parseExposition(strings.NewReader("name notanumber\n"))
	require.ErrorContains(t, err, `value "notanumber"`)
}
