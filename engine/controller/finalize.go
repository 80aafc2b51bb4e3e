package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// finalize runs the finalizer of an object being deleted and removes the
// controller's finalizer once it is done.
func (c *Controller) finalize(ctx context.Context, r *run, obj *unstructured.Unstructured, attempt int) result {
	if !slices.Contains(obj.GetFinalizers(), c.opts.FinalizerName) {
		return result{skipped: true}
	}
	// The cache may lag behind a finalizer removal that just happened:
	// read the object fresh so that a finished finalizer is not called again.
	fresh, err := c.opts.Client.Get(ctx, c.opts.For.Resource, obj.GetNamespace(), obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return result{skipped: true}
	}
	if err != nil {
		return result{err: fmt.Errorf("get before finalize: %w", err)}
	}
	if fresh.GetUID() != obj.GetUID() || !slices.Contains(fresh.GetFinalizers(), c.opts.FinalizerName) {
		return result{skipped: true}
	}
	obj = fresh
	if c.opts.Finalizer == nil {
		// Left by a plugin version that had finalize: nobody will finish it.
		return c.removeFinalizer(ctx, r, obj, false)
	}
	observed := c.observedChildren(r, obj)
	req := &abi.FinalizeRequest{Children: childrenByKind(observed), Attempt: attempt, Config: c.opts.Config}
	if req.Object, err = encodeObject(obj.Object); err != nil {
		return result{err: fmt.Errorf("encode object: %w", err)}
	}
	resp, err := c.callFinalize(ctx, req)
	if resp != nil {
		for _, ev := range resp.Events {
			r.event(c, obj, ev.Type, ev.Reason, ev.Message)
		}
	}
	var res result
	var ready readyCondition
	switch {
	case err != nil:
		res.err = err
		ready = readyCondition{status: metav1.ConditionFalse, reason: ReasonFinalizeFailed, message: err.Error()}
	case resp.Error != "":
		res, ready = pluginFailed("plugin finalize", resp.Error, resp.Terminal, ReasonFinalizeFailed, ReasonFinalizeTerminal)
	case !resp.Done:
		ready = readyCondition{status: metav1.ConditionFalse, reason: ReasonFinalizing, message: "waiting for the finalizer"}
		if resp.RequeueAfter > 0 {
			res.requeueAfter = resp.RequeueAfter
		} else {
			res.err = ErrNotDone
		}
	default:
		return c.removeFinalizer(ctx, r, obj, true)
	}
	if res.err != nil && !res.terminal {
		ready.retrying(attempt)
	}
	status, _ := obj.Object["status"].(map[string]any)
	if err := c.writeStatus(ctx, r, obj, status, nil, ready); err != nil {
		if apierrors.IsConflict(err) {
			return result{err: err}
		}
		if apierrors.IsNotFound(err) {
			return result{skipped: true}
		}
		if res.err == nil {
			res.err = err
		}
	}
	return res
}

// removeFinalizer takes the controller's finalizer off obj, letting its
// deletion complete.
func (c *Controller) removeFinalizer(ctx context.Context, r *run, obj *unstructured.Unstructured, finalized bool) result {
	obj.SetFinalizers(withoutFinalizer(obj.GetFinalizers(), c.opts.FinalizerName))
	if _, err := c.opts.Client.Update(ctx, c.opts.For.Resource, obj, metav1.UpdateOptions{FieldManager: c.opts.FieldManager}); err != nil {
		if apierrors.IsNotFound(err) {
			return result{}
		}
		return result{err: fmt.Errorf("remove finalizer: %w", err)}
	}
	if finalized {
		r.event(c, obj, "Normal", "Finalized", "finalizer "+c.opts.FinalizerName+" removed")
	}
	return result{}
}

func withoutFinalizer(fins []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(fins), func(f string) bool { return f == name })
}

func (c *Controller) callFinalize(ctx context.Context, req *abi.FinalizeRequest) (resp *abi.FinalizeResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("%w: %v", ErrPanic, p)
		}
	}()
	resp, err = c.opts.Finalizer.Finalize(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("finalize: %w", err)
	}
	if resp == nil {
		return nil, errors.New("finalize: no response")
	}
	return resp, nil
}
