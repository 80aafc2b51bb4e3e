package main

import (
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newCompletionCommand) }

func newCompletionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print the completion script for bash, zsh or fish. Resource arguments of get,
describe and delete complete from what the server serves.`,
		Example: `  # bash, for this shell
  source <(setpoint completion bash)
  # bash, for good
  setpoint completion bash > /etc/bash_completion.d/setpoint
  # zsh
  setpoint completion zsh > "${fpath[1]}/_setpoint"
  # fish
  setpoint completion fish > ~/.config/fish/completions/setpoint.fish`,
		ValidArgs:             []string{"bash", "zsh", "fish"},
		DisableFlagsInUseLine: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("usage: setpoint completion bash|zsh|fish")
			}
			switch args[0] {
			case "bash", "zsh", "fish":
				return nil
			}
			return usageError("no completion for shell %q: want bash, zsh or fish", args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			default:
				return root.GenFishCompletion(out, true)
			}
		},
	}
}

// completeResources completes the first argument with the resources the
// server serves, when it can be reached.
func completeResources(o *clientOptions) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := o.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		lists, _ := c.discovery.ServerPreferredResources()
		var names []string
		for _, l := range lists {
			for _, r := range l.APIResources {
				if !hasVerb(r.Verbs, "get") {
					continue
				}
				names = append(names, r.Name)
				names = append(names, r.ShortNames...)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
