package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// guardGroups makes every command that only groups subcommands (setpoint
// plugin, say) refuse an unknown subcommand as a usage error with cobra's
// suggestions, as the root does, instead of printing its help and exiting
// 0. Called with no arguments, such a command still prints its help.
func guardGroups(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		guardGroups(sub)
	}
	if cmd == cmd.Root() || !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		return unknownSubcommand(c, args[0])
	}
}

// unknownSubcommand is the usage error for `PARENT ARG` where ARG is not a
// subcommand of PARENT.
func unknownSubcommand(parent *cobra.Command, arg string) error {
	if parent.SuggestionsMinimumDistance <= 0 {
		parent.SuggestionsMinimumDistance = 2
	}
	msg := fmt.Sprintf("unknown command %q for %q", arg, parent.CommandPath())
	s := parent.SuggestionsFor(arg)
	// cobra suggests by name only; `plugin delet` should find the alias
	// `delete` of `uninstall` too.
	for _, c := range parent.Commands() {
		for _, alias := range c.Aliases {
			if c.IsAvailableCommand() && editDistance(strings.ToLower(arg), alias) <= parent.SuggestionsMinimumDistance && !slices.Contains(s, alias) {
				s = append(s, alias)
			}
		}
	}
	if len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return usageError("%s\n\nRun '%s --help' for its commands.", msg, parent.CommandPath())
}
