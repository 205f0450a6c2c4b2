//go:build integration

package main

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// startUI runs `flowctl ui` for a kubeconfig and returns the address it printed.
func startUI(t *testing.T, e *env, kc string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"ui", "--kubeconfig", kc, "--stream-server", e.addr, "--ca-file", e.ca, "--listen", "127.0.0.1:0"}, &strings.Builder{}, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		require.Zero(t, <-done, errOut.String())
	})
	re := regexp.MustCompile(`http://\S+/\?key=[0-9a-f]+`)
	var url string
	require.Eventually(t, func() bool {
		url = re.FindString(errOut.String())
		return url != ""
	}, 10*time.Second, 20*time.Millisecond, "flowctl ui printed no address: %s", errOut.String())
	return url
}

// browser is headless Chromium (Debian's chromium, scripts/deps.sh).
func browser(t *testing.T) context.Context {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	require.NoError(t, err, "chromium: not found; install it with scripts/deps.sh (Debian chromium)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Flag("headless", "new"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The browser starts with the first action and lives as long as the
	// context that ran it: this one, not a tab's.
	require.NoError(t, chromedp.Do(ctx))
	return ctx
}

// tab opens a new tab of the browser for one test.
func tab(t *testing.T, b context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel() })
	return ctx
}

// The web view in a real browser: it shows the flows of the user's
// Namespace as they arrive, on the map (denied in their own colour) and in
// the table; a user without a grant sees the stream's refusal.
func TestUIInABrowser(t *testing.T) {
	e := startEnv(t)
	now := time.Now()
	e.push(t, record("a-to-b", "ns-a", "web", "ns-b", "api", now), record("b-to-c", "ns-b", "api", "ns-c", "db", now))
	b := browser(t)

	t.Run("flows", func(t *testing.T) {
		url := startUI(t, e, e.user(t, "dev", "ns-a"))
		ctx := tab(t, b)
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(url),
			chromedp.SendKeys(chromedp.CSS("#namespace"), "ns-a"),
			chromedp.Click(chromedp.CSS(`button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-id="a-to-b"]`)),
		))
		// A flow that arrives while the page is open, denied by a policy.
		denied := record("a-denied", "ns-a", "scanner", "ns-b", "api", time.Now())
		denied.IngressPolicy = flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: "ns-b", Name: "deny", RuleAction: flowrecord.RuleActionDrop}
		e.push(t, denied, record("c-to-b", "ns-c", "db", "ns-b", "api", time.Now()))
		require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-id="a-denied"].denied`))))
		eval := func(js string) string {
			v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
			require.NoError(t, err, js)
			return v
		}
		require.Equal(t, "a-denied,a-to-b", eval(`[...document.querySelectorAll("#flows tbody tr")].map(r => r.dataset.id).join(",")`),
			"newest first; nothing of other Namespaces (b-to-c, c-to-b)")
		require.Equal(t, "live", eval(`document.getElementById("status").textContent`))
		require.Equal(t, "?namespace=ns-a&direction=both", eval(`location.search`), "the key left the address bar")
		require.Empty(t, eval(`document.cookie`), "the key's cookie is HttpOnly")
		require.Equal(t, "pod/ns-a/scanner,pod/ns-a/web,redacted/,redacted/ns-b", eval(`[...document.querySelectorAll("#map g.vertex")].map(g => g.dataset.id).sort().join(",")`),
			"the peers ns-a may not identify are withheld (a denied one's Namespace too)")
		require.Equal(t, "pod/ns-a/scanner>redacted/ rgb(208, 2, 27)",
			eval(`(() => { const p = document.querySelector("#map path.edge.denied"); return p ? p.dataset.from + ">" + p.dataset.to + " " + getComputedStyle(p).stroke : ""; })()`),
			"denied in its own colour")
		require.Equal(t, "1", eval(`String(document.querySelectorAll("#map path.edge.allowed").length)`), "web to the withheld peer")

		// The stream's filters, from a link: only what scanner sent.
		ctx = tab(t, b)
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(url+"&namespace=ns-a&pod=scanner&direction=from"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-id="a-denied"]`)),
		))
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#flows tbody tr")].map(r => r.dataset.id).join(",")`))
		require.NoError(t, err)
		require.Equal(t, "a-denied", rows)
		pod, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("input[name=pod]").value`))
		require.NoError(t, err)
		require.Equal(t, "scanner", pod, "the form shows the filters of the link")
	})

	t.Run("no grant", func(t *testing.T) {
		url := startUI(t, e, e.user(t, "stranger"))
		ctx := tab(t, b)
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(url+"&namespace=ns-a"),
			chromedp.WaitVisible(chromedp.CSS("#error")),
		))
		msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#error")))
		require.NoError(t, err)
		require.Contains(t, msg, `permission denied: user "system:serviceaccount:team:stranger" may not watch flows`)
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#flows tbody tr").length`))
		require.NoError(t, err)
		require.Zero(t, rows)
	})

	t.Run("without the key", func(t *testing.T) {
		url := startUI(t, e, e.user(t, "dev2", "ns-a"))
		ctx := tab(t, b)
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(strings.Split(url, "?")[0]+"api/flows?namespace=ns-a")))
		body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		require.NoError(t, err)
		require.Contains(t, body, "this page's key is missing or wrong")
	})
}
