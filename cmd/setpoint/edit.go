package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func init() { subcommands = append(subcommands, newEditCommand) }

type editOptions struct {
	client clientOptions
}

func newEditCommand() *cobra.Command {
	o := &editOptions{}
	cmd := &cobra.Command{
		Use:   "edit (RESOURCE NAME | RESOURCE/NAME)",
		Short: "Edit an object in your editor and write it back",
		Long: `Open an object as YAML in $KUBE_EDITOR, then $EDITOR, then vi, and write it
back when the editor exits, as kubectl edit does. Saving it unchanged, or
emptying the file, cancels.

When the server refuses the edited object (invalid, or a file that does not
parse) the editor opens again with the error at the top and your edits
below. When the object changed on the server while you edited it, your
changes are laid over the latest version and the editor opens again to
show it: save to write it. Saving a refused file unchanged gives up (exit 1)
and keeps your edits in the file it names.

` + exitCodeHelp,
		Example: `  setpoint edit widget demo
  KUBE_EDITOR=nano setpoint edit plugin/widget`,
		Args: rangeArgs(1, 2, "(RESOURCE NAME | RESOURCE/NAME)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEdit(cmd.Context(), o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.ValidArgsFunction = completeResources(&o.client)
	addNamespaceFlag(cmd, &o.client)
	return cmd
}

const editHeader = `# Edit the object below. Lines beginning with '#' are ignored, and an
# empty file cancels the edit. If the server refuses it, this file opens
# again with the reason.
#
`

// editorCommand is the editor to run: $KUBE_EDITOR, $EDITOR, then vi.
func editorCommand() string {
	return firstNonEmpty(os.Getenv("KUBE_EDITOR"), os.Getenv("EDITOR"), "vi")
}

// runEditor opens path in the editor, which may carry arguments
// (EDITOR="code --wait"), attached to the terminal.
func runEditor(path string) error {
	ed := editorCommand()
	cmd := exec.Command("sh", "-c", ed+` "$1"`, "sh", path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("editor %q: %w", ed, err)
	}
	return nil
}

// dropCommentLines drops the lines that begin with '#'.
func dropCommentLines(b []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			out.WriteString(line)
		}
	}
	return out.Bytes()
}

// commented is msg as '#' lines.
func commented(msg string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	return b.String() + "#\n"
}

func runEdit(ctx context.Context, o *editOptions, args []string, stdout, stderr io.Writer) error {
	res, name, err := oneObject(args)
	if err != nil {
		return err
	}
	c, r, ri, err := o.client.connectTo(res)
	if err != nil {
		return err
	}
	base, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return c.explain(err)
	}
	cleanForOutput(base)
	original, err := yaml.Marshal(base.Object)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "setpoint-edit-*.yaml")
	if err != nil {
		return err
	}
	path := f.Name()
	f.Close()
	keep := false
	defer func() {
		if !keep {
			os.Remove(path)
		}
	}()

	text, problem := original, ""
	var refused []byte // the content the server last refused
	for {
		if err := os.WriteFile(path, []byte(editHeader+problem+string(text)), 0o600); err != nil {
			return err
		}
		if err := runEditor(path); err != nil {
			keep = problem != ""
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		content := dropCommentLines(raw)
		switch {
		case len(bytes.TrimSpace(content)) == 0:
			fmt.Fprintln(stderr, "Edit cancelled: the file is empty.")
			return nil
		case refused == nil && bytes.Equal(content, original):
			fmt.Fprintln(stderr, "Edit cancelled, no changes made.")
			return nil
		case refused != nil && bytes.Equal(content, refused):
			keep = true
			return exitError(exitFailure, fmt.Errorf("edit cancelled, no valid changes were saved; your edits are in %s", path))
		}
		edited := &unstructured.Unstructured{}
		jsonText, err := yaml.YAMLToJSON(content)
		if err == nil {
			err = edited.UnmarshalJSON(jsonText)
		}
		if err != nil {
			text, refused = content, content
			problem = commented("The edited file does not parse:\n" + err.Error())
			continue
		}
		if edited.GetName() != base.GetName() || edited.GetKind() != base.GetKind() || edited.GetAPIVersion() != base.GetAPIVersion() {
			text, refused = content, content
			problem = commented(fmt.Sprintf("apiVersion, kind and metadata.name cannot be changed (want %s %s %q)", base.GetAPIVersion(), base.GetKind(), base.GetName()))
			continue
		}
		_, err = ri.Update(ctx, edited, metav1.UpdateOptions{FieldManager: "setpoint", FieldValidation: metav1.FieldValidationStrict})
		if err == nil {
			fmt.Fprintf(stdout, "%s edited\n", r.objectName(name))
			return nil
		}
		if apierrors.IsConflict(err) {
			conflictMsg := err.Error()
			// Lay the edits (base -> edited) over the latest version.
			latest, gerr := ri.Get(ctx, name, metav1.GetOptions{})
			if gerr != nil {
				return c.explain(gerr)
			}
			cleanForOutput(latest)
			merged, merr := mergeEdits(base, edited, latest)
			if merr != nil {
				return merr
			}
			base = latest
			if original, err = yaml.Marshal(latest.Object); err != nil {
				return err
			}
			text, refused = merged, nil
			problem = commented(conflictMsg + "\n\nThe object changed while you edited it: your changes are laid over the latest\nversion below. Save to write it.")
			continue
		}
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			keep = true
			return fmt.Errorf("%w (your edits are in %s)", c.explain(err), path)
		}
		text, refused = content, content
		problem = commented(c.explain(err).Error())
	}
}

// mergeEdits applies the changes from base to edited onto latest, as YAML.
func mergeEdits(base, edited, latest *unstructured.Unstructured) ([]byte, error) {
	b, err := base.MarshalJSON()
	if err != nil {
		return nil, err
	}
	e, err := edited.MarshalJSON()
	if err != nil {
		return nil, err
	}
	l, err := latest.MarshalJSON()
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.CreateMergePatch(b, e)
	if err != nil {
		return nil, fmt.Errorf("compute the edits: %w", err)
	}
	// The edits carry the old resourceVersion only if the user changed it.
	merged, err := jsonpatch.MergePatch(l, patch)
	if err != nil {
		return nil, fmt.Errorf("apply the edits to the latest version: %w", err)
	}
	return yaml.JSONToYAML(merged)
}
