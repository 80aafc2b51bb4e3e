package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	k8sversion "k8s.io/apimachinery/pkg/version"
)

type versionOptions struct {
	client     clientOptions
	clientOnly bool
	output     string
}

func newVersionCommand() *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client and server versions",
		Long: `Print the version of this setpoint binary and of the server it talks to. The
client version is printed even when the server cannot be reached; the exit
code then says so.

` + exitCodeHelp,
		Example: `  setpoint version
  setpoint version --client
  setpoint version -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVersion(o, cmd.OutOrStdout())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.Flags().BoolVar(&o.clientOnly, "client", false, "print the client version only; do not contact the server")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml (default: plain text)")
	return cmd
}

func runVersion(o *versionOptions, stdout io.Writer) error {
	out := output{format: o.output}
	switch o.output {
	case "", "json", "yaml":
	default:
		return usageError("-o %q: want json or yaml", o.output)
	}
	cv := clientVersion()
	doc := map[string]any{"clientVersion": cv}
	var serverErr error
	var sv *k8sversion.Info
	if !o.clientOnly {
		c, err := o.client.connect()
		if err == nil {
			sv, err = c.discovery.ServerVersion()
			err = c.explain(err)
		}
		serverErr = err
		if sv != nil {
			doc["serverVersion"] = sv
		}
	}
	if o.output != "" {
		if err := printObject(stdout, out, doc); err != nil {
			return err
		}
		return serverErr
	}
	fmt.Fprintf(stdout, "Client Version: %s\n", describeVersion(cv))
	if sv != nil {
		fmt.Fprintf(stdout, "Server Version: %s\n", describeVersion(*sv))
	}
	return serverErr
}

// clientVersion is this binary's version with the commit, tree state and
// commit time the Go toolchain stamped into it (runtime/debug.ReadBuildInfo),
// the same stamp the server reports at /version.
func clientVersion() k8sversion.Info {
	v := k8sversion.Info{
		GitVersion: version,
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.GitCommit = s.Value
		case "vcs.time":
			v.BuildDate = s.Value
		case "vcs.modified":
			v.GitTreeState = "clean"
			if s.Value == "true" {
				v.GitTreeState = "dirty"
			}
		}
	}
	return v
}

// describeVersion is a version on one line: the version, then the commit,
// its tree state and time when the binary carries them.
func describeVersion(v k8sversion.Info) string {
	s := v.GitVersion
	if v.GitCommit == "" {
		return s
	}
	s += " (commit " + v.GitCommit
	if v.GitTreeState != "" {
		s += ", " + v.GitTreeState
	}
	if v.BuildDate != "" {
		s += ", " + v.BuildDate
	}
	return s + ")"
}
