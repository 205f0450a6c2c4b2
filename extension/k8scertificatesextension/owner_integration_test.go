//go:build integration

package k8scertificatesextension

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/flowtel/flowtel/testbed/controlplane"
)

// ownerEnforcing is an API server that enforces who may set owners
// (OwnerReferencesPermissionEnforcement, on in OpenShift): an ownerReference
// may be added to an existing object only by whom may delete it, and
// blockOwnerDeletion true only by whom may update the owner's finalizers.
// The testbed has no garbage collector (no controller manager): the tests
// look at the references, not at deletion.
func ownerEnforcing(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	cp := controlplane.StartWith(t, controlplane.Options{ExtraArgs: []string{"--enable-admission-plugins=OwnerReferencesPermissionEnforcement"}})
	t.Cleanup(func() { controlplane.CloseIdleConnections(cp.Admin) })
	return cp
}

// certificatesRole is the Role the deployments ship for the default names,
// with the owner ServiceAccount owner ("" leaves its rule out) and the
// Secrets' verbs.
func certificatesRole(owner string, secretVerbs ...string) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: secretVerbs, ResourceNames: []string{
			"flowtel-gateway-ca-key", "flowtel-node-ca-key", "flowtel-gateway-ca", "flowtel-node-ca",
			"flowtel-gateway-tls", "flowtel-node-tls", "flowtel-flowstream-tls"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
	}
	if owner != "" {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{owner}, Verbs: []string{"get"}})
	}
	return rules
}

// asServiceAccount makes ServiceAccount ns/name, binds it to a Role of rules,
// waits until the authorizer grants the Role's first rule and returns a client
// with its token.
func asServiceAccount(t *testing.T, cp *controlplane.ControlPlane, ns, name string, rules []rbacv1.PolicyRule) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	token := cp.ServiceAccount(t, ns, name)
	if _, err := cp.Admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := rules[0]
	attrs := &authzv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Resource: r.Resources[0], Name: r.ResourceNames[0]}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		sar, err := cp.Admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + ns + ":" + name,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: attrs,
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Role of %s/%s is not in force after 10 s", ns, name)
		}
	}
	c, err := kubernetes.NewForConfig(cp.Config(token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { controlplane.CloseIdleConnections(c) })
	return c
}

func getSecret(t *testing.T, cp *controlplane.ControlPlane, ns, name string) *corev1.Secret {
	t.Helper()
	s, err := cp.Admin.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Secret %s/%s: %v", ns, name, err)
	}
	return s
}

// ownerRefs is each ownerReference as one comparable string.
func ownerRefs(s *corev1.Secret) []string {
	var out []string
	for _, r := range s.OwnerReferences {
		out = append(out, ownerRef(r.APIVersion, r.Kind, r.Name, r.UID, r.Controller, r.BlockOwnerDeletion))
	}
	return out
}

func ownerRef(apiVersion, kind, name string, uid types.UID, controller, block *bool) string {
	b := func(p *bool) string {
		if p == nil {
			return "nil"
		}
		if *p {
			return "true"
		}
		return "false"
	}
	return apiVersion + "/" + kind + "/" + name + "/" + string(uid) + " controller=" + b(controller) + " blockOwnerDeletion=" + b(block)
}

// saRef is the reference a managed Secret carries to ServiceAccount ns/name.
func saRef(t *testing.T, cp *controlplane.ControlPlane, ns, name string) string {
	t.Helper()
	sa, err := cp.Admin.CoreV1().ServiceAccounts(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ownerRef("v1", "ServiceAccount", name, sa.UID, nil, new(false))
}

// TestSecretsOwnedByServiceAccount: with owner_service_account, and only the
// shipped Role, every Secret the extension makes belongs to the gateway's
// ServiceAccount (Kubernetes deletes them with the install); the Secrets an
// earlier version made without it get it (an upgrade), keeping their
// certificates and any other owner; a user's own Secret is not touched; a
// ServiceAccount made anew is followed.
func TestSecretsOwnedByServiceAccount(t *testing.T) {
	cp := ownerEnforcing(t)
	ctx := context.Background()
	const ns, owner = "owned", "flowtel-gateway"
	gateway := asServiceAccount(t, cp, ns, owner, certificatesRole(owner, "get", "update", "delete"))
	secrets := cp.Admin.CoreV1().Secrets(ns)

	// A user's own Secret beside them, and an earlier version's Secrets
	// (no owner_service_account), one of them with an owner of its own.
	mine, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-own"}, Data: map[string][]byte{"k": []byte("mine")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	earlier := newProvisioner(t, cp, ns, time.Now)
	earlier.client = gateway
	if _, err := earlier.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	names := earlier.secretNames()
	before := map[string]*corev1.Secret{}
	for _, name := range names {
		if s := getSecret(t, cp, ns, name); len(s.OwnerReferences) > 0 {
			t.Fatalf("without owner_service_account %s has owners %v", name, ownerRefs(s))
		}
	}
	other, err := cp.Admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other-owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := getSecret(t, cp, ns, "flowtel-gateway-ca")
	s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: other.Name, UID: other.UID}}
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		before[name] = getSecret(t, cp, ns, name)
	}

	newOwned := func() *provisioner {
		p := newProvisioner(t, cp, ns, time.Now)
		p.cfg.OwnerServiceAccount, p.client = owner, gateway
		return p
	}
	// The upgrade: every Secret gets the owner; no certificate is reissued.
	written, err := newOwned().ensure(ctx)
	if err != nil {
		t.Fatalf("upgrade with owner_service_account %s: %v", owner, err)
	}
	if len(written) != 0 {
		t.Errorf("adding the owner wrote %v: no certificate is to be reissued", written)
	}
	want := saRef(t, cp, ns, owner)
	otherRef := ownerRef("v1", "ConfigMap", other.Name, other.UID, nil, nil)
	for _, name := range names {
		s := getSecret(t, cp, ns, name)
		wantRefs := []string{want}
		if name == "flowtel-gateway-ca" {
			wantRefs = []string{otherRef, want}
		}
		if got := ownerRefs(s); strings.Join(got, ", ") != strings.Join(wantRefs, ", ") {
			t.Errorf("after the upgrade %s is owned by %v, want %v", name, got, wantRefs)
		}
		if !maps.EqualFunc(s.Data, before[name].Data, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("adding the owner changed %s's data", name)
		}
		before[name] = s
	}
	if s := getSecret(t, cp, ns, mine.Name); len(s.OwnerReferences) > 0 || s.ResourceVersion != mine.ResourceVersion {
		t.Errorf("the user's own Secret was changed (owners %v)", ownerRefs(s))
	}

	// The next check changes nothing.
	if written, err := newOwned().ensure(ctx); err != nil || len(written) != 0 {
		t.Errorf("check after the upgrade: wrote %v, %v; want nothing", written, err)
	}
	for _, name := range names {
		if s := getSecret(t, cp, ns, name); s.ResourceVersion != before[name].ResourceVersion {
			t.Errorf("check after the upgrade wrote %s", name)
		}
	}

	// A first install: every Secret is created with the owner.
	for _, name := range names {
		if err := secrets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if written, err := newOwned().ensure(ctx); err != nil || len(written) != len(names) {
		t.Fatalf("first install: wrote %v, %v; want all %d", written, err, len(names))
	}
	for _, name := range names {
		if got := ownerRefs(getSecret(t, cp, ns, name)); len(got) != 1 || got[0] != want {
			t.Errorf("created %s is owned by %v, want %s", name, got, want)
		}
	}
	checkChains(t, cp, ns, time.Now())

	// The ServiceAccount deleted and made anew before the garbage collector
	// got to the Secrets: they follow the new one (and its new UID).
	if err := cp.Admin.CoreV1().ServiceAccounts(ns).Delete(ctx, owner, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: owner}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	anew := newOwned()
	anew.client = cp.Admin // the old token died with the old ServiceAccount
	if _, err := anew.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	renewed := saRef(t, cp, ns, owner)
	if renewed == want {
		t.Fatal("the ServiceAccount made anew has the old UID")
	}
	for _, name := range names {
		if got := ownerRefs(getSecret(t, cp, ns, name)); len(got) != 1 || got[0] != renewed {
			t.Errorf("after the ServiceAccount was made anew %s is owned by %v, want %s", name, got, renewed)
		}
	}
}

// TestOwnerNeedsDelete: where the API server enforces who may set owners
// (OpenShift), adding the owner to an earlier version's Secret takes delete on
// it, which the shipped Role grants; without, the check fails and says so.
func TestOwnerNeedsDelete(t *testing.T) {
	cp := ownerEnforcing(t)
	ctx := context.Background()
	const ns, owner = "enforced", "flowtel-gateway"
	if _, err := newProvisioner(t, cp, ns, time.Now).ensure(ctx); err != nil {
		t.Fatal(err)
	}
	gateway := asServiceAccount(t, cp, ns, owner, certificatesRole(owner, "get", "update"))
	p := newProvisioner(t, cp, ns, time.Now)
	p.cfg.OwnerServiceAccount, p.client = owner, gateway
	_, err := p.ensure(ctx)
	if err == nil || !strings.Contains(err.Error(), "cannot set an ownerRef on a resource you can't delete") {
		t.Fatalf("adding the owner without delete on the Secrets: %v; want the API server's refusal", err)
	}
}

// TestOwnerUnreadable: an owner_service_account the extension may not read,
// or that does not exist, fails the check with an error naming the
// ServiceAccount and the permission; no Secret is made (it would outlive the
// install); a user's Secret of one of the names is still left alone first.
func TestOwnerUnreadable(t *testing.T) {
	cp := ownerEnforcing(t)
	ctx := context.Background()
	const ns, owner = "unreadable", "flowtel-gateway"
	// The Role of before owner_service_account: the Secrets alone.
	gateway := asServiceAccount(t, cp, ns, owner, certificatesRole("", "get", "update", "delete"))
	p := newProvisioner(t, cp, ns, time.Now)
	p.cfg.OwnerServiceAccount, p.client = owner, gateway
	_, err := p.ensure(ctx)
	for _, want := range []string{"owner_service_account: may not read ServiceAccount unreadable/flowtel-gateway",
		"grant get on serviceaccounts, resourceNames [flowtel-gateway], in namespace unreadable"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without get on the ServiceAccount: %v; want it to say %q", err, want)
		}
	}
	noSecrets := func(when string) {
		t.Helper()
		list, err := cp.Admin.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("%s: %d Secrets made; want none", when, len(list.Items))
		}
	}
	noSecrets("owner unreadable")

	p.client, p.cfg.OwnerServiceAccount = cp.Admin, "flowtel-gone"
	_, err = p.ensure(ctx)
	if want := "owner_service_account: ServiceAccount unreadable/flowtel-gone, which the certificate Secrets would belong to, does not exist"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("owner absent: %v; want it to say %q", err, want)
	}
	noSecrets("owner absent")

	// Foreign Secrets are reported as such before the owner is looked at,
	// and keep no owner.
	if _, err := cp.Admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "flowtel-node-tls"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.cfg.OwnerServiceAccount = owner
	if _, err := p.ensure(ctx); !errors.Is(err, errNotOurs) {
		t.Errorf("with a foreign flowtel-node-tls: %v; want it reported as not ours", err)
	}
	if s := getSecret(t, cp, ns, "flowtel-node-tls"); len(s.OwnerReferences) > 0 || s.Labels[managedByLabel] != "" {
		t.Errorf("the foreign Secret was changed: owners %v, labels %v", ownerRefs(s), s.Labels)
	}
}
