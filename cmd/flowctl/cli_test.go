package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKubectlFlags: kubectl's connection flags (ConfigFlags on the root)
// make the REST config flowctl's credential comes from, and the API server's
// TLS flags are not the flow stream's.
func TestKubectlFlags(t *testing.T) {
	p := startImpostor(t)
	ctx := context.Background()
	kc := writeKubeconfig(t, `{token: kubeconfig-token}`)
	stream := []string{"--stream-server", p.addr, "--ca-file", p.caFile, "-n", "ns-a"}

	// --token replaces the kubeconfig user's token.
	_, errOut, code := flowctl(ctx, append([]string{"observe", "--kubeconfig", kc, "--token", "flag-token"}, stream...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "does not serve the flow stream")
	tokens, _ := p.seen()
	require.Equal(t, []string{"Bearer flag-token"}, tokens)

	// --user picks another kubeconfig user, --context another context.
	two := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(two, []byte(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: token-u}}, {name: v, user: {token: token-v}}, {name: w, user: {token: token-w}}]
contexts: [{name: test, context: {cluster: test, user: u}}, {name: other, context: {cluster: test, user: w}}]
current-context: test
`), 0o600))
	for _, c := range []struct {
		flags []string
		want  string
	}{{nil, "Bearer token-u"}, {[]string{"--user", "v"}, "Bearer token-v"}, {[]string{"--context", "other"}, "Bearer token-w"}} {
		_, errOut, code = flowctl(ctx, append(append([]string{"records", "--kubeconfig", two}, c.flags...), stream...)...)
		assert.Equal(t, 1, code, errOut)
		tokens, _ = p.seen()
		require.Equal(t, c.want, tokens[len(tokens)-1], "%v", c.flags)
	}
	seen := len(tokens)

	// The stream does not impersonate: --as is refused before anything is sent.
	_, errOut, code = flowctl(ctx, append([]string{"observe", "--kubeconfig", kc, "--as", "bob"}, stream...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "the flow stream does not impersonate")
	// kubectl's --insecure-skip-tls-verify is the API server's: the stream's
	// certificate (not verifiable without --ca-file) is still verified, and
	// no credential goes to it.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, errOut, code = flowctl(cctx, "observe", "--kubeconfig", kc, "--insecure-skip-tls-verify", "--stream-server", p.addr, "-n", "ns-a")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "unavailable")
	tokens, _ = p.seen()
	require.Len(t, tokens, seen, "a credential went to a stream whose certificate was not verified")
}

// TestCommandLine: help is kubectl's (exit 0), a long flag with one dash is
// refused rather than read as shorthands, and the exit codes stay.
func TestCommandLine(t *testing.T) {
	ctx := context.Background()
	out, _, code := flowctl(ctx, "observe", "--help")
	assert.Equal(t, 0, code)
	for _, f := range []string{"--stream-server", "--since", "-f, --follow", "-o, --output", "-n, --namespace", "--kubeconfig", "--context", "--as"} {
		assert.Contains(t, out, f)
	}
	out, _, code = flowctl(ctx, "--help")
	assert.Equal(t, 0, code)
	for _, c := range []string{"observe", "records", "metrics", "map", "top", "ui", "policy", "completion"} {
		assert.Regexp(t, `(?m)^  `+c+` `, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"observe", "-since", "5m"}, "-since: a long flag takes two dashes: --since"},
		{[]string{"map", "-clickhouse=http://x"}, "two dashes: --clickhouse=http://x"},
		{[]string{"policy", "what-if", "-kubeconfig", "k"}, "two dashes: --kubeconfig"},
	} {
		_, errOut, code := flowctl(ctx, c.args...)
		assert.Equal(t, 2, code, "%v", c.args)
		assert.Contains(t, errOut, c.want, "%v", c.args)
	}
	for sh, want := range map[string]string{"bash": "__start_flowctl", "zsh": "#compdef flowctl", "fish": "complete -c flowctl", "powershell": "Register-ArgumentCompleter"} {
		out, _, code := flowctl(ctx, "completion", sh)
		assert.Equal(t, 0, code, sh)
		assert.Contains(t, out, want, sh)
	}
	_, errOut, code := flowctl(ctx, "policy", "what-if", "--nope")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "See 'flowctl policy what-if --help'")
}

// TestBinary builds flowctl into a directory that also holds it as
// kubectl-flows (a symlink, as make build makes it) and runs it.
func TestBinary(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "flowctl"), ".").CombinedOutput()
	require.NoError(t, err, string(out))
	require.NoError(t, os.Symlink("flowctl", filepath.Join(dir, pluginName)))
	t.Run("kubectl plugin", func(t *testing.T) { testKubectlPlugin(t, dir) })
	t.Run("bash completion", func(t *testing.T) { testBashCompletion(t, dir) })
	t.Run("kubectl completion", func(t *testing.T) { testKubectlCompletion(t, dir) })
}

// testKubectlCompletion: kubectl completes "kubectl flows ..." through
// kubectl_complete-flows, which asks kubectl-flows.
func testKubectlCompletion(t *testing.T, dir string) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl")
	}
	script, err := os.ReadFile("kubectl_complete-flows")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubectl_complete-flows"), script, 0o755))
	complete := func(args ...string) string {
		cmd := exec.Command(kubectl, append([]string{"__complete", "flows"}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.Output()
		require.NoError(t, err)
		return string(out)
	}
	out := complete("")
	for _, c := range []string{"observe", "records", "map", "policy"} {
		assert.Regexp(t, `(?m)^`+c+`\t`, out)
	}
	assert.Regexp(t, `(?m)^--stream-server\t`, complete("observe", "--stream-s"))
}

// testKubectlPlugin: run as kubectl-flows (how kubectl runs the plugin
// "kubectl flows"), the help names kubectl flows.
func testKubectlPlugin(t *testing.T, dir string) {
	out, err := exec.Command(filepath.Join(dir, pluginName), "--help").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "kubectl flows [command]")
	assert.Contains(t, string(out), `Use "kubectl flows [command] --help"`)
	assert.NotContains(t, string(out), "flowctl [command]")
	out, _ = exec.Command(filepath.Join(dir, pluginName), "observe", "--nope").CombinedOutput()
	assert.Contains(t, string(out), "See 'kubectl flows observe --help'")
	out, err = exec.Command(filepath.Join(dir, "flowctl"), "--help").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "flowctl [command]")
}

// testBashCompletion: flowctl completion bash is a script that, sourced in
// bash, completes the subcommands and a command's flags (it asks flowctl,
// found on PATH, through its hidden __complete command).
func testBashCompletion(t *testing.T, dir string) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, err := exec.Command(filepath.Join(dir, "flowctl"), "completion", "bash").Output()
	require.NoError(t, err)
	require.Contains(t, string(script), "__start_flowctl")
	scriptFile := filepath.Join(t.TempDir(), "flowctl.bash")
	require.NoError(t, os.WriteFile(scriptFile, script, 0o600))
	complete := func(line string) []string {
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		// _get_comp_words_by_ref is bash-completion's; a minimal one stands in.
		sh := `_get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
compopt() { :; }
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
__start_flowctl
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, append([]string{"-c", sh, "bash", scriptFile}, words...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.Output()
		require.NoError(t, err)
		return strings.Fields(string(out))
	}
	got := complete("flowctl ")
	for _, c := range []string{"observe", "records", "metrics", "map", "top", "ui", "policy", "completion"} {
		assert.Contains(t, got, c)
	}
	assert.ElementsMatch(t, []string{"recommend", "what-if"}, complete("flowctl policy "))
	assert.ElementsMatch(t, []string{"--stream-server", "--stream-tls-server-name", "--stream-insecure-skip-tls-verify"}, complete("flowctl observe --stream-"))
}
