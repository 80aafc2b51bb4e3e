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
		Use:           "setpoint",
		Short:         "Setpoint: a control plane you program with WebAssembly",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand())
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	return root
}

// subcommands are registered by the files that define them, so that each verb
// lives in a file of its own.
var subcommands []func() *cobra.Command

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the client version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "Client Version: %s\n", version)
			return err
		},
	}
}

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
