package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

func init() { subcommands = append(subcommands, newPatchCommand) }

type patchOptions struct {
	client      clientOptions
	patch       string
	patchFile   string
	typ         string
	subresource string
	dryRun      string
}

func newPatchCommand() *cobra.Command {
	o := &patchOptions{}
	cmd := &cobra.Command{
		Use:   "patch (RESOURCE NAME | RESOURCE/NAME) -p PATCH [--type merge|json]",
		Short: "Change fields of an object with a JSON merge patch or a JSON patch",
		Long: `Change fields of one object in place, as kubectl patch does:

  --type merge   a JSON merge patch (RFC 7386): the fields given replace
                 those of the object, null removes one (the default)
  --type json    a JSON patch (RFC 6902): a list of operations

The patch may be written in JSON or YAML. Strategic merge patches are for
Kubernetes' built-in kinds; custom resources, which is what Setpoint serves,
take merge or json.

` + exitCodeHelp,
		Example: `  setpoint patch widget demo -p '{"spec":{"size":"large"}}'
  setpoint patch widget/demo --type json -p '[{"op":"remove","path":"/metadata/finalizers/0"}]'
  setpoint patch widget demo --subresource status -p '{"status":{"state":"Ready"}}'`,
		Args: rangeArgs(1, 2, "(RESOURCE NAME | RESOURCE/NAME) -p PATCH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPatch(cmd.Context(), o, args, cmd.OutOrStdout())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.ValidArgsFunction = completeResources(&o.client)
	addNamespaceFlag(cmd, &o.client)
	f := cmd.Flags()
	f.StringVarP(&o.patch, "patch", "p", "", "the patch, in JSON or YAML")
	f.StringVar(&o.patchFile, "patch-file", "", "read the patch from this file (- for stdin)")
	f.StringVar(&o.typ, "type", "merge", "merge (JSON merge patch) or json (JSON patch)")
	f.StringVar(&o.subresource, "subresource", "", "patch this subresource (status or scale) instead of the object")
	f.StringVar(&o.dryRun, "dry-run", "none", "none, or server: the server checks the patched object and stores nothing")
	return cmd
}

// oneObject is RESOURCE NAME or RESOURCE/NAME.
func oneObject(args []string) (res, name string, err error) {
	res, names, err := splitResourceArgs(args)
	if err != nil {
		return "", "", err
	}
	if len(names) != 1 {
		return "", "", usageError("name one object: RESOURCE NAME or RESOURCE/NAME")
	}
	return res, names[0], nil
}

func runPatch(ctx context.Context, o *patchOptions, args []string, stdout io.Writer) error {
	var pt types.PatchType
	switch o.typ {
	case "merge":
		pt = types.MergePatchType
	case "json":
		pt = types.JSONPatchType
	case "strategic":
		return usageError("--type strategic: strategic merge patches are for Kubernetes' built-in kinds; custom resources take --type merge (fields replace fields, null removes) or --type json (RFC 6902 operations)")
	default:
		return usageError("--type %q: want merge or json", o.typ)
	}
	switch o.subresource {
	case "", "status", "scale":
	default:
		return usageError("--subresource %q: want status or scale", o.subresource)
	}
	res, name, err := oneObject(args)
	if err != nil {
		return err
	}
	text := o.patch
	switch {
	case o.patch != "" && o.patchFile != "":
		return usageError("pass either -p or --patch-file, not both")
	case o.patchFile == "-":
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		text = string(b)
	case o.patchFile != "":
		b, err := os.ReadFile(o.patchFile)
		if err != nil {
			return usageError("--patch-file: %v", err)
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" {
		return usageError("no patch: pass -p PATCH or --patch-file FILE")
	}
	data, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return exitError(exitInvalid, fmt.Errorf("the patch is neither JSON nor YAML: %w", err))
	}
	var shape any
	_ = json.Unmarshal(data, &shape)
	if _, isList := shape.([]any); isList != (pt == types.JSONPatchType) {
		if isList {
			return usageError("the patch is a list of operations: that is --type json")
		}
		return usageError("--type json takes a list of operations, such as [{\"op\":\"replace\",\"path\":\"/spec/size\",\"value\":\"large\"}]")
	}
	dryRun, suffix, err := parseDryRun(o.dryRun)
	if err != nil {
		return err
	}
	c, r, ri, err := o.client.connectTo(res)
	if err != nil {
		return err
	}
	var sub []string
	if o.subresource != "" {
		sub = []string{o.subresource}
	}
	before, err := ri.Get(ctx, name, metav1.GetOptions{}, sub...)
	if err != nil {
		return c.explain(err)
	}
	after, err := ri.Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: "setpoint", DryRun: dryRun, FieldValidation: metav1.FieldValidationStrict}, sub...)
	if err != nil {
		return c.explain(err)
	}
	result := "patched"
	if dryRun == nil && after.GetResourceVersion() == before.GetResourceVersion() {
		result = "patched (no change)"
	}
	fmt.Fprintf(stdout, "%s %s%s\n", r.objectName(name), result, suffix)
	return nil
}
