package k8sclient

import (
	"strings"
	"testing"
)

func TestCheckAuth(t *testing.T) {
	for _, tc := range []struct {
		authType, kubeconfig, want string
	}{
		{AuthServiceAccount, "", ""},
		{AuthKubeConfig, "", ""},
		{AuthKubeConfig, "/etc/kube/config", ""},
		{AuthServiceAccount, "/etc/kube/config", "kubernetes.kubeconfig: only used with auth_type: kubeConfig (got auth_type: serviceAccount)"},
		{"token", "", `kubernetes.auth_type: unknown (got "token"); set serviceAccount (in a Pod) or kubeConfig`},
	} {
		err := CheckAuth("kubernetes.", tc.authType, tc.kubeconfig)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s/%q: %v, want no error", tc.authType, tc.kubeconfig, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s/%q: %v, want an error containing %q", tc.authType, tc.kubeconfig, err, tc.want)
		}
	}
}

func TestNewRefusesUnknownAuth(t *testing.T) {
	if _, err := New("token", "", "test"); err == nil || !strings.Contains(err.Error(), "auth_type: unknown") {
		t.Fatalf("New with auth_type token: %v, want an error naming auth_type", err)
	}
}
