// Package sdk holds the Go SDK's own source, embedded: the SDK is not
// published on a module proxy, so `setpoint plugin init` writes this copy
// into each new plugin project (and points the project's go.mod at it
// with a replace directive), which then builds offline.
//
// Plugins import the SDK's packages (abi, guest, extism, plugin,
// plugintest, typed, schema, realhost), never this one.
package sdk

import "embed"

// Source is the SDK module: go.mod and every package's files. Test files
// and testdata are included; writers may leave them out.
//
//go:embed go.mod abi extism guest internal plugin plugintest realhost schema typed
var Source embed.FS
