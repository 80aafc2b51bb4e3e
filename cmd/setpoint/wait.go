package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/jsonpath"
)

func init() { subcommands = append(subcommands, newWaitCommand) }

type waitOptions struct {
	client  clientOptions
	forCond string
	timeout time.Duration
}

func newWaitCommand() *cobra.Command {
	o := &waitOptions{}
	cmd := &cobra.Command{
		Use:   "wait (RESOURCE NAME... | RESOURCE/NAME...) --for=CONDITION",
		Short: "Wait until objects meet a condition, or are deleted",
		Long: `Wait until each named object meets a condition, as kubectl wait does:

  --for=condition=Ready           status.conditions has type Ready with status True
  --for=condition=Ready=False     ... with status False
  --for=delete                    the object is gone (finalizers done)
  --for=create                    the object exists
  --for=jsonpath='{.status.state}'=Ready
                                  the value at the JSONPath equals the value
  --for=jsonpath='{.status.state}'
                                  the JSONPath has a value

It prints "TYPE/NAME condition met" for each object. An object that does
not exist fails at once (exit 4) unless waiting for delete or create; a
timeout fails with exit 1.

` + exitCodeHelp,
		Example: `  setpoint wait --for=condition=Ready plugin/widget
  setpoint wait --for=jsonpath='{.status.state}'=Ready widget/demo --timeout=60s
  setpoint wait --for=delete widgetprovision demo`,
		Args: rangeArgs(1, -1, "(RESOURCE NAME... | RESOURCE/NAME...) --for=CONDITION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWait(cmd.Context(), o, args, cmd.OutOrStdout())
		},
	}
	addClientFlags(cmd, &o.client)
	cmd.ValidArgsFunction = completeResources(&o.client)
	addNamespaceFlag(cmd, &o.client)
	f := cmd.Flags()
	f.StringVar(&o.forCond, "for", "", "the condition to wait for: condition=TYPE[=STATUS], delete, create or jsonpath='{PATH}'[=VALUE]")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for each object; 0 checks once")
	return cmd
}

// waitCondition is a parsed --for.
type waitCondition struct {
	text   string // as given, for messages
	delete bool
	create bool
	// condition=TYPE=STATUS
	condType, condStatus string
	// jsonpath=PATH[=VALUE]
	jp       *jsonpath.JSONPath
	jpValue  string
	jpHasVal bool
}

func parseWaitFor(s string) (waitCondition, error) {
	w := waitCondition{text: s}
	switch {
	case s == "":
		return w, usageError("--for is required: condition=TYPE[=STATUS], delete, create or jsonpath='{PATH}'[=VALUE]")
	case s == "delete":
		w.delete = true
	case s == "create":
		w.create = true
	case strings.HasPrefix(s, "condition="):
		rest := strings.TrimPrefix(s, "condition=")
		typ, status, ok := strings.Cut(rest, "=")
		if !ok {
			status = "True"
		}
		if typ == "" || status == "" {
			return w, usageError("--for=%s: want condition=TYPE or condition=TYPE=STATUS", s)
		}
		w.condType, w.condStatus = typ, status
	case strings.HasPrefix(s, "jsonpath="):
		rest := strings.TrimPrefix(s, "jsonpath=")
		expr, value := rest, ""
		if i := strings.LastIndex(rest, "}"); i >= 0 {
			expr, value = rest[:i+1], rest[i+1:]
		} else if e, v, ok := strings.Cut(rest, "="); ok {
			expr, value = e, "="+v
		}
		if value != "" {
			v, ok := strings.CutPrefix(value, "=")
			if !ok {
				return w, usageError("--for=%s: want jsonpath='{PATH}' or jsonpath='{PATH}'=VALUE", s)
			}
			w.jpValue, w.jpHasVal = v, true
		}
		if !strings.HasPrefix(expr, "{") {
			expr = "{" + expr + "}"
		}
		w.jp = jsonpath.New("wait")
		if err := w.jp.Parse(expr); err != nil {
			return w, usageError("--for=%s: %v", s, err)
		}
	default:
		return w, usageError("--for=%s: want condition=TYPE[=STATUS], delete, create or jsonpath='{PATH}'[=VALUE]", s)
	}
	return w, nil
}

// met tells whether obj (nil when it does not exist) meets w.
func (w waitCondition) met(obj *unstructured.Unstructured) bool {
	switch {
	case w.delete:
		return obj == nil
	case obj == nil:
		return false
	case w.create:
		return true
	case w.jp != nil:
		res, err := w.jp.FindResults(obj.Object)
		if err != nil || len(res) == 0 || len(res[0]) == 0 {
			return false
		}
		if !w.jpHasVal {
			return true
		}
		for _, v := range res[0] {
			if fmt.Sprint(v.Interface()) != w.jpValue {
				return false
			}
		}
		return true
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if strings.EqualFold(str(m["type"]), w.condType) {
			return strings.EqualFold(str(m["status"]), w.condStatus)
		}
	}
	return false
}

func runWait(ctx context.Context, o *waitOptions, args []string, stdout io.Writer) error {
	cond, err := parseWaitFor(o.forCond)
	if err != nil {
		return err
	}
	type named struct{ res, name string }
	var objs []named
	if strings.Contains(args[0], "/") {
		for _, a := range args {
			res, name, ok := strings.Cut(a, "/")
			if !ok || res == "" || name == "" {
				return usageError("%q: use either RESOURCE NAME... or RESOURCE/NAME...", a)
			}
			objs = append(objs, named{res, name})
		}
	} else {
		if len(args) < 2 {
			return usageError("name the objects to wait for: RESOURCE NAME... or RESOURCE/NAME...")
		}
		for _, n := range args[1:] {
			objs = append(objs, named{args[0], n})
		}
	}
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	for _, n := range objs {
		r, err := c.resolve(n.res)
		if err != nil {
			return err
		}
		t := target{r: r, ns: c.namespace, name: n.name}
		if err := waitFor(ctx, c, t, cond, o.timeout); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s condition met\n", r.objectName(n.name))
	}
	return nil
}

// errWaitTimeout is returned when an object did not meet its condition in time.
var errWaitTimeout = errors.New("timed out waiting for the condition")

// waitFor polls t until it meets cond, for at most timeout.
func waitFor(ctx context.Context, c *client, t target, cond waitCondition, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ri := c.resourceInterface(t.r, t.ns)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		// A fresh context so that the last check is not cut by the deadline.
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		obj, err := ri.Get(gctx, t.name, metav1.GetOptions{})
		gcancel()
		switch {
		case apierrors.IsNotFound(err):
			obj = nil
			if !cond.delete && !cond.create {
				return exitError(exitNotFound, fmt.Errorf("%s %q not found", t.r.qualified(), t.name))
			}
		case err != nil:
			return c.explain(err)
		}
		if cond.met(obj) {
			return nil
		}
		select {
		case <-ctx.Done():
			if context.Cause(ctx) == context.DeadlineExceeded || errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return exitError(exitFailure, fmt.Errorf("%w %s on %s/%s", errWaitTimeout, cond.text, t.r.qualified(), t.name))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
