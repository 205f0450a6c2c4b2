//go:build integration

package conntrackreceiver

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
)

const noCapEnv = "FLOWTEL_CONNTRACK_NOCAP_NETNS"

// TestStartWithoutNetAdmin runs the test binary again without CAP_NET_ADMIN
// (setpriv drops it from the bounding set): Start must fail saying so.
func TestStartWithoutNetAdmin(t *testing.T) {
	l := newLab(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv not found: install util-linux")
	}
	cmd := exec.Command(setpriv, "--bounding-set", "-net_admin", os.Args[0], "-test.run", "^TestStartWithoutNetAdminChild$", "-test.v")
	cmd.Env = append(os.Environ(), noCapEnv+"="+l.path(l.node))
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil || !strings.Contains(string(out), "PASS: TestStartWithoutNetAdminChild") {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
}

func TestStartWithoutNetAdminChild(t *testing.T) {
	netns := os.Getenv(noCapEnv)
	if netns == "" {
		t.Skip("run by TestStartWithoutNetAdmin")
	}
	rcv, err := NewFactory().CreateLogs(t.Context(), receivertestSettings(t), testConfig(netns), new(sinkNop))
	if err != nil {
		t.Fatal(err)
	}
	err = rcv.Start(t.Context(), componenttest.NewNopHost())
	if err == nil || !strings.Contains(err.Error(), "CAP_NET_ADMIN") || !strings.Contains(err.Error(), netns) {
		t.Fatalf("Start without CAP_NET_ADMIN: %v, want an error naming CAP_NET_ADMIN and the netns", err)
	}
	t.Log(err)
	if err := rcv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}
