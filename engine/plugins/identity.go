package plugins

import (
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/setpoint-dev/setpoint/engine"
)

// PluginGroup is the group of every plugin's user.
const PluginGroup = "system:setpoint:plugins"

// pluginUserPrefix starts the name of a plugin's user.
const pluginUserPrefix = "system:setpoint:plugin:"

// PluginUser is the user plugin name acts as: its writes (host calls, the
// children, status, finalizers and events of its reconcile) are admitted,
// authorized and audited as this user, "system:setpoint:plugin:NAME" in the
// groups PluginGroup and system:authenticated.
func PluginUser(name string) user.Info {
	return &user.DefaultInfo{Name: pluginUserPrefix + name, Groups: []string{PluginGroup, user.AllAuthenticated}}
}

// ManagerUser is the identity the plugin manager writes as: the Plugins'
// status, finalizers and events, and each plugin's Role and ClusterRole,
// are audited as "system:setpoint:plugin-manager". A
// plugin's own writes are its user's (PluginUser).
var ManagerUser = engine.SystemUser("system:setpoint:plugin-manager")

// pluginOf returns the plugin a request's user is, if it is one.
func pluginOf(u user.Info) (string, bool) {
	if u == nil || !slices.Contains(u.GetGroups(), PluginGroup) {
		return "", false
	}
	return strings.CutPrefix(u.GetName(), pluginUserPrefix)
}

// fieldManager is the field manager of plugin's writes.
func fieldManager(plugin string) string { return "plugin:" + plugin }
