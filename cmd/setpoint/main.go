package main

import (
	"fmt"
	"os"
	"strings"

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
found through --server, --token and --certificate-authority, then
SETPOINT_SERVER, SETPOINT_TOKEN and SETPOINT_CERTIFICATE_AUTHORITY, then the
kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) — the admin.kubeconfig
the server writes in its data directory works for setpoint and kubectl alike.

` + exitCodeHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%v%s; see `%s --help`", err, kubectlOnlyFlag(c, err), c.CommandPath())
	})
	root.AddCommand(newVersionCommand())
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	guardGroups(root)
	return root
}

// kubectlOnlyFlags are flags kubectl's verbs take that setpoint's do not
// (by long name, or -X for a shorthand), with what to do instead, so that
// someone used to kubectl learns more than "unknown flag".
var kubectlOnlyFlags = map[string]map[string]string{
	"get": {
		"sort-by":             "setpoint get does not sort; kubectl get --sort-by works against the same server",
		"label-columns":       "use --show-labels, or kubectl get -L",
		"-L":                  "use --show-labels, or kubectl get -L",
		"show-managed-fields": "setpoint never prints managedFields; kubectl get --show-managed-fields does",
	},
}

// kubectlOnlyFlag is a hint for an unknown flag of cmd that kubectl has.
func kubectlOnlyFlag(cmd *cobra.Command, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if short, isShort := strings.CutPrefix(msg, "unknown shorthand flag: '"); isShort && len(short) > 0 {
		name, ok = "-"+short[:1], true
	}
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(name, "=")
	if hint := kubectlOnlyFlags[cmd.Name()][name]; hint != "" {
		return " (" + hint + ")"
	}
	return ""
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
