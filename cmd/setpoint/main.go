// Command setpoint is Setpoint's one binary: `setpoint server` runs the control
// plane, and the client verbs (get, apply, ...) talk to a running one.
//
// This is the one place where the concrete store backends, the plugin host and
// the engine meet.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "setpoint",
		Short: "Setpoint: a control plane you program with WebAssembly",
		Long: `Setpoint: a control plane you program with WebAssembly.

` + "`setpoint server`" + ` runs the control plane; the other verbs talk to a running one,
found through --server and --token, then SETPOINT_SERVER and SETPOINT_TOKEN, then
the kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) — the admin.kubeconfig
the server writes in its data directory works for setpoint and kubectl alike.

` + exitCodeHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%v; see `%s --help`", err, c.CommandPath())
	})
	root.AddCommand(newVersionCommand())
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	return root
}

// subcommands are registered by the files that define them, so that each verb
// lives in a file of its own.
var subcommands []func() *cobra.Command

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, paletteFor(os.Stderr).red("error:"), err)
		os.Exit(exitCode(err))
	}
}
