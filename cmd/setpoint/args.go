package main

import (
	"github.com/spf13/cobra"
)

// Argument checks that fail as usage errors (exit code 2).

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("%s takes no arguments, got %q; see `%s --help`", cmd.CommandPath(), args, cmd.CommandPath())
	}
	return nil
}

func rangeArgs(lo, hi int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || hi >= 0 && len(args) > hi {
			return usageError("usage: %s %s; see `%s --help`", cmd.CommandPath(), what, cmd.CommandPath())
		}
		return nil
	}
}
