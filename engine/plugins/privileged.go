package plugins

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine"
)

// privilegedGroups are the API groups whose objects can grant privileges or
// change what the server serves: Plugins (which name their own permissions
// and run code), CustomResourceDefinitions (which could redefine or drop
// the Plugin kind), and the Kubernetes groups of authorization,
// authentication, admission configuration and certificates.
var privilegedGroups = []string{
	Group,
	"apiextensions.k8s.io",
	"rbac.authorization.k8s.io",
	"authentication.k8s.io",
	"authorization.k8s.io",
	"admissionregistration.k8s.io",
	"certificates.k8s.io",
}

// privilegedCore are the core resources that hold or mint credentials.
var privilegedCore = []string{"serviceaccounts", "secrets"}

// privilegedResource reports whether objects of gr can grant privileges, so
// that no plugin writes them unless an administrator set spec.privileged on
// its Plugin.
func privilegedResource(gr schema.GroupResource) bool {
	if gr.Group == "" {
		return slices.Contains(privilegedCore, gr.Resource)
	}
	return slices.Contains(privilegedGroups, gr.Group)
}

// checkPrivileges refuses a spec that names a privileged resource where it
// would let the plugin write it: reconcile.for (status and finalizers),
// reconcile.owns (children), permissions.write (host calls) and mutating
// admission rules. "*" in permissions.write and in admission is allowed; it
// covers only unprivileged resources (see Admitter.checkPrivileged). Only
// spec.privileged, which an administrator sets, lifts the rule.
func (sp Spec) checkPrivileges() error {
	if sp.Privileged {
		return nil
	}
	var named []string
	check := func(field, res string) {
		if res != "*" && privilegedResource(schema.ParseGroupResource(res)) {
			named = append(named, fmt.Sprintf("%s names %s", field, res))
		}
	}
	if sp.Reconcile != nil {
		check("spec.reconcile.for", sp.Reconcile.For)
		for _, o := range sp.Reconcile.Owns {
			check("spec.reconcile.owns", o)
		}
	}
	for _, w := range sp.Permissions.Write {
		check("spec.permissions.write", w)
	}
	for _, r := range sp.Admission {
		if r.Type == Mutating {
			for _, res := range r.Resources {
				check("spec.admission (Mutating)", res)
			}
		}
	}
	if len(named) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s, which can grant privileges: a plugin may write it only when an administrator sets spec.privileged: true on its Plugin",
		ErrInvalidSpec, strings.Join(named, "; "))
}

// checkPrivileged refuses a plugin's write (a host call, a child, a status)
// to a resource that can grant privileges, unless its Plugin sets
// spec.privileged: whatever "*" or owns says, such writes need an
// administrator's consent.
func (a *Admitter) checkPrivileged(req *engine.AdmissionRequest) error {
	gr := req.Resource.GroupResource()
	if !privilegedResource(gr) {
		return nil
	}
	name, ok := pluginOf(req.User)
	if !ok || (*a.privileged.Load())[name] {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Details: &metav1.StatusDetails{Group: gr.Group, Kind: gr.Resource, Name: req.Name},
		Message: fmt.Sprintf("plugin %q may not write %s: it can grant privileges, and the Plugin does not set spec.privileged (only an administrator should)", name, gr),
	}}
}
