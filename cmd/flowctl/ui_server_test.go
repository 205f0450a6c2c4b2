package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// uiUnderTest is a running `flowctl ui`; its flow stream address leads
// nowhere, which no test here reaches.
type uiUnderTest struct {
	base   *url.URL // http://host:port/
	key    string
	stderr *syncBuffer
}

// startUIOffline runs `flowctl ui` with args until the test ends.
func startUIOffline(t *testing.T, args ...string) *uiUnderTest {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errOut := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"ui", "--kubeconfig", writeKubeconfig(t, `{token: secret-token}`), "--stream-server", "127.0.0.1:1"}, args...), io.Discard, errOut)
	}()
	t.Cleanup(func() {
		cancel()
		require.Zero(t, <-done, errOut.String())
	})
	re := regexp.MustCompile(`(http://\S+/)\?key=([0-9a-f]+)`)
	var m []string
	require.Eventually(t, func() bool {
		m = re.FindStringSubmatch(errOut.String())
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, "flowctl ui printed no address: %s", errOut.String())
	base, err := url.Parse(m[1])
	require.NoError(t, err)
	return &uiUnderTest{base: base, key: m[2], stderr: errOut}
}

// get requests path (with its query) from the ui, with the Host header
// host (the listen address if ""), and does not follow redirects.
func (u *uiUnderTest) get(t *testing.T, host, path string, cookies ...*http.Cookie) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u.base.String()+strings.TrimPrefix(path, "/"), nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// A page of another site whose name resolves to 127.0.0.1 (DNS rebinding)
// is same-origin with itself, not with flowctl ui: the Host header names
// it, and flowctl answers only for the address it listens on.
func TestUIHostHeader(t *testing.T) {
	u := startUIOffline(t, "--listen", "127.0.0.1:0")
	port := u.base.Port()
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "[::1]:" + port} {
		assert.Equal(t, http.StatusOK, u.get(t, host, "/").StatusCode, host)
	}
	for _, host := range []string{"rebind.example:" + port, "127.0.0.1.nip.io:" + port, "localhost.rebind.example:" + port,
		"127.0.0.1:1" + port, "localhost", "127.0.0.1", "rebind.example"} {
		for _, path := range []string{"/", "/app.js", "/?key=" + u.key, "/api/flows?namespace=ns-a&key=" + u.key} {
			resp := u.get(t, host, path)
			assert.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "Host %q %s", host, path)
			assert.Contains(t, body(t, resp), "flowctl ui answers only for", "Host %q %s", host, path)
			assert.Empty(t, resp.Cookies(), "Host %q %s", host, path)
		}
	}
}

// The key of the printed address becomes an HttpOnly, SameSite=Strict
// cookie, and the page is sent to its address without it: it stays out of
// the address bar, the history and Referer headers. The stream endpoint
// takes the cookie, not a key in its URL.
func TestUIKeyBecomesACookie(t *testing.T) {
	u := startUIOffline(t)
	resp := u.get(t, "", "/?key="+u.key+"&namespace=ns-a&pod=web")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/?namespace=ns-a&pod=web", resp.Header.Get("Location"))
	assert.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Len(t, resp.Cookies(), 1)
	c := resp.Cookies()[0]
	assert.Equal(t, "flowctl-ui-"+u.base.Port(), c.Name, "one per port: cookies do not tell ports apart")
	assert.Equal(t, u.key, c.Value)
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	assert.Equal(t, "/", c.Path)
	assert.Zero(t, c.MaxAge, "a session cookie")
	assert.True(t, c.Expires.IsZero(), "a session cookie")

	resp = u.get(t, "", "/?key=0123&namespace=ns-a")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, body(t, resp), "this address's key is wrong")
	assert.Empty(t, resp.Cookies())

	// The stream endpoint: the cookie, nothing else.
	for name, cookies := range map[string][]*http.Cookie{
		"none":         nil,
		"wrong value":  {{Name: c.Name, Value: strings.Repeat("0", len(u.key))}},
		"another port": {{Name: "flowctl-ui-1", Value: u.key}},
	} {
		resp := u.get(t, "", "/api/flows?namespace=ns-a&key="+u.key, cookies...)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, name)
		assert.Contains(t, body(t, resp), "this page's key is missing or wrong: open the address flowctl ui printed", name)
	}
	resp = u.get(t, "", "/api/flows", c) // no scope: the stream is not opened
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "event: failed\ndata: \"pick a Namespace, or cluster-wide\"\n\n", body(t, resp))

	// The page itself asks nothing of the key (the browser sends the cookie).
	js := body(t, u.get(t, "", "/app.js"))
	assert.NotContains(t, js, `"key"`)
	assert.NotContains(t, js, "key=")
}

// flowctl ui serves on loopback only, unless told to serve plain HTTP to the network.
func TestUIListen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, listen := range []string{"0.0.0.0:0", ":0"} {
		_, errOut, code := flowctl(ctx, "ui", "--kubeconfig", writeKubeconfig(t, `{token: secret-token}`), "--stream-server", "127.0.0.1:1", "--listen", listen)
		require.Equal(t, 1, code, errOut)
		assert.Contains(t, errOut, "--listen "+listen+": not a loopback address", listen)
		assert.Contains(t, errOut, "plain HTTP", listen)
		assert.Contains(t, errOut, "--allow-remote-plain-http", listen)
	}

	u := startUIOffline(t, "--listen", "0.0.0.0:0", "--allow-remote-plain-http")
	port := u.base.Port()
	assert.Regexp(t, `flowctl: WARNING: serving on \S+:`+port+` over plain HTTP \(--allow-remote-plain-http\): the key below and your flows travel unencrypted`, u.stderr.String())
	assert.Equal(t, http.StatusOK, u.get(t, "127.0.0.1:"+port, "/").StatusCode)
	assert.Equal(t, http.StatusOK, u.get(t, "192.0.2.10:"+port, "/").StatusCode, "an address: no DNS name to rebind")
	assert.Equal(t, http.StatusMisdirectedRequest, u.get(t, "rebind.example:"+port, "/").StatusCode, "a name")
}
