package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// maxConflictRetries bounds how many times one reconcile starts over from
// fresh state after a 409, before it backs off like any failure.
const maxConflictRetries = 3

// Outcomes of a reconcile, as counted in the metrics.
const (
	outcomeSuccess  = "success"
	outcomeError    = "error"
	outcomeTerminal = "terminal"
	outcomeSkipped  = "skipped"
)

// result is what one reconcile of a key asks of the queue.
type result struct {
	err          error
	terminal     bool
	requeueAfter time.Duration
	skipped      bool
}

// pluginFailed is the result and Ready condition of a call whose response
// reports the error msg: reason, or terminalReason when the plugin marked
// the error terminal. prefix begins the result's error.
func pluginFailed(prefix, msg string, terminal bool, reason, terminalReason string) (result, readyCondition) {
	if terminal {
		reason = terminalReason
	}
	return result{err: fmt.Errorf("%s: %s", prefix, msg), terminal: terminal},
		readyCondition{status: metav1.ConditionFalse, reason: reason, message: msg}
}

func (r result) outcome() string {
	switch {
	case r.skipped:
		return outcomeSkipped
	case r.err != nil && r.terminal:
		return outcomeTerminal
	case r.err != nil:
		return outcomeError
	}
	return outcomeSuccess
}

// reconcile brings the object under key to its desired state, starting over
// from a fresh read when a write meets a conflict.
func (c *Controller) reconcile(ctx context.Context, r *run, key Key) result {
	cached, ok, stale := r.own.fromCache(key, r.primary.get)
	if !ok {
		r.own.forget(key)
		r.terminal.forget(key)
		c.gone(key)
		return result{skipped: true} // deleted; its children are collected by ownerReference
	}
	var obj *unstructured.Unstructured
	if stale {
		// The cache has not seen this controller's last write: comparing
		// with the cached status could skip a write the store needs.
		fresh, err := c.opts.Client.Get(ctx, c.opts.For.Resource, key.Namespace, key.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			r.own.forget(key)
			c.gone(key)
			return result{skipped: true}
		}
		if err != nil {
			return result{err: fmt.Errorf("get past stale cache: %w", err)}
		}
		obj = fresh
	} else {
		obj = cached.DeepCopy()
	}
	for attempt := 0; ; attempt++ {
		before := obj // reconcileObject changes its metadata at most
		res := c.reconcileObject(ctx, r, key, obj)
		if res.terminal {
			r.terminal.mark(key, before)
		}
		if !apierrors.IsConflict(res.err) || attempt >= maxConflictRetries {
			return res
		}
		fresh, err := c.opts.Client.Get(ctx, c.opts.For.Resource, key.Namespace, key.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return result{skipped: true}
		}
		if err != nil {
			return result{err: fmt.Errorf("get after conflict: %w", err)}
		}
		obj = fresh
	}
}

// gone tells Options.Gone that the object under key was deleted.
func (c *Controller) gone(key Key) {
	if c.opts.Gone != nil {
		c.opts.Gone(key)
	}
}

// reconcileObject reconciles obj, which the caller owns, once.
func (c *Controller) reconcileObject(ctx context.Context, r *run, key Key, obj *unstructured.Unstructured) result {
	attempt := r.queue.NumRequeues(key)
	status, _ := obj.Object["status"].(map[string]any)
	if obj.GetDeletionTimestamp() != nil {
		if c.opts.Finalizer != nil && terminalAt(status, obj.GetGeneration(), ReasonFinalizeTerminal) && r.terminal.seen(key, obj) {
			return result{skipped: true}
		}
		return c.finalize(ctx, r, obj, attempt)
	}
	// A terminal failure is not retried until the object changes; but a
	// new run (a restart, a new plugin version) tries once more what its
	// status says failed, since the cause may be state a process holds
	// (the plugin manager's loaded modules) or code that changed.
	if terminalAt(status, obj.GetGeneration(), ReasonTerminalError) && r.terminal.seen(key, obj) {
		return result{skipped: true}
	}
	if has := slices.Contains(obj.GetFinalizers(), c.opts.FinalizerName); has != (c.opts.Finalizer != nil) {
		// Add the finalizer, or remove it after a swap to a plugin version
		// without finalize, so that deletion never waits on nobody.
		if has {
			obj.SetFinalizers(withoutFinalizer(obj.GetFinalizers(), c.opts.FinalizerName))
		} else {
			obj.SetFinalizers(append(obj.GetFinalizers(), c.opts.FinalizerName))
		}
		updated, err := c.opts.Client.Update(ctx, c.opts.For.Resource, obj, metav1.UpdateOptions{FieldManager: c.opts.FieldManager})
		if err != nil {
			return result{err: fmt.Errorf("set finalizer: %w", err)}
		}
		obj = updated
		r.own.wrote(key, updated.GetResourceVersion())
		status, _ = obj.Object["status"].(map[string]any)
	}

	observed := c.observedChildren(r, obj)
	req := &abi.ReconcileRequest{
		Children: childrenByKind(observed),
		Attempt:  attempt,
		Config:   c.opts.Config,
	}
	var err error
	if req.Object, err = encodeObject(obj.Object); err != nil {
		return result{err: fmt.Errorf("encode object: %w", err)}
	}
	resp, callErr := c.callReconcile(ctx, req)

	var res result
	ready := readyCondition{status: metav1.ConditionTrue, reason: ReasonReconciled, message: "reconciled"}
	var pluginStatus map[string]any
	switch {
	case callErr != nil:
		res.err = callErr
		ready = readyCondition{status: metav1.ConditionFalse, reason: ReasonPluginError, message: callErr.Error()}
	case resp.Error != "":
		res, ready = pluginFailed("plugin", resp.Error, resp.Terminal, ReasonReconcileFailed, ReasonTerminalError)
	default:
		if err := c.applyChildren(ctx, obj, observed, resp.Children); err != nil {
			if apierrors.IsConflict(err) {
				return result{err: err}
			}
			res.err = err
			c.recordFailure(err)
			reason := ReasonApplyFailed
			if errors.Is(err, ErrInvalidChild) {
				res.terminal = true
				reason = ReasonTerminalError
			}
			ready = readyCondition{status: metav1.ConditionFalse, reason: reason, message: err.Error()}
		}
		res.requeueAfter = resp.RequeueAfter
	}
	if resp != nil && len(resp.Status) > 0 && string(resp.Status) != "null" {
		if m, ok := objjson.Decode(resp.Status); ok {
			pluginStatus = m
		} else if err := utiljson.Unmarshal(resp.Status, &pluginStatus); err != nil {
			pluginStatus = nil
		}
		if pluginStatus == nil {
			if res.err == nil {
				res.err = fmt.Errorf("plugin: status is not a JSON object")
				res.terminal = true
				ready = readyCondition{status: metav1.ConditionFalse, reason: ReasonTerminalError, message: res.err.Error()}
			}
		}
	}

	if res.err != nil && !res.terminal && !suspended(res.err) {
		ready.retrying(attempt)
	}
	if suspended(res.err) && saysSuspended(status, ready) {
		return res
	}
	err = c.writeStatus(ctx, r, obj, status, pluginStatus, ready)
	if err != nil && pluginStatus != nil && tooLarge(err) {
		// The plugin's status does not fit in the object: Ready says so,
		// where the plugin's author looks, and the status is left out.
		res.err, res.terminal = fmt.Errorf("plugin: status: %w", err), true
		ready = readyCondition{status: metav1.ConditionFalse, reason: ReasonTerminalError,
			message: "the status the plugin returned makes the object too large: " + err.Error()}
		err = c.writeStatus(ctx, r, obj, status, nil, ready)
	}
	if err != nil {
		if apierrors.IsConflict(err) {
			return result{err: err}
		}
		if apierrors.IsNotFound(err) {
			return result{skipped: true} // deleted meanwhile
		}
		if pluginStatus != nil && refused(err) {
			// The server refused the plugin's status (schema, size,
			// admission): say so on the object, keeping the status it has,
			// so that the plugin's author sees why without the server's log.
			res = c.statusRefused(ctx, r, obj, status, ready, err, attempt)
			if apierrors.IsConflict(res.err) {
				return result{err: res.err}
			}
			if apierrors.IsNotFound(res.err) {
				return result{skipped: true}
			}
		} else if res.err == nil {
			res.err = err
		}
	}
	if resp != nil {
		for _, ev := range resp.Events {
			r.event(c, obj, ev.Type, ev.Reason, ev.Message)
		}
	}
	return res
}

// writeStatus writes the status obj should have, if it differs from the
// observed one, and records an event when the Ready condition changes.
func (c *Controller) writeStatus(ctx context.Context, r *run, obj *unstructured.Unstructured, observed, fromPlugin map[string]any, ready readyCondition) error {
	want := desiredStatus(observed, fromPlugin, obj.GetGeneration(), ready, c.opts.Now())
	if objjson.ValueEqual(observed, want) {
		return nil
	}
	out := obj.DeepCopy()
	out.Object["status"] = want
	updated, err := c.opts.Client.UpdateStatus(ctx, c.opts.For.Resource, out, metav1.UpdateOptions{FieldManager: c.opts.FieldManager})
	if err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	r.own.wrote(Key{obj.GetNamespace(), obj.GetName()}, updated.GetResourceVersion())
	before, _ := readyOf(observed)
	if msg, _ := before["message"].(string); before["status"] == string(ready.status) && before["reason"] == ready.reason &&
		strings.HasPrefix(msg, truncate(ready.message)) && ready.status == metav1.ConditionTrue {
		return nil // only the detail changed
	}
	// A failure is recorded at every attempt: the recorder counts a repeat
	// into the Event written before (count, lastTimestamp), so kubectl
	// describe shows how often and for how long it has been failing.
	if ready.status == metav1.ConditionTrue {
		r.event(c, obj, "Normal", ready.reason, ready.message)
	} else {
		r.event(c, obj, "Warning", ready.reason, ready.message)
	}
	return nil
}

// statusRefused writes the observed status with Ready=False saying why the
// server refused the plugin's status (refusal), and counts the failure
// against the plugin. A refusal for invalid content is terminal, as an
// invalid child is: the same output meets the same answer until the object
// (or the plugin) changes; any other refusal (forbidden, too large for now)
// is retried with backoff.
func (c *Controller) statusRefused(ctx context.Context, r *run, obj *unstructured.Unstructured, observed map[string]any, ready readyCondition, refusal error, attempt int) result {
	res := result{err: fmt.Errorf("%w: %w", ErrStatusRefused, refusal), terminal: apierrors.IsInvalid(refusal)}
	msg := "the server refused the plugin's status: " + apiMessage(refusal)
	if ready.status == metav1.ConditionFalse {
		msg += "; " + ready.message
	}
	reason := ReasonStatusRefused
	if res.terminal {
		reason = ReasonTerminalError
	}
	cond := readyCondition{status: metav1.ConditionFalse, reason: reason, message: msg}
	if !res.terminal {
		cond.retrying(attempt)
	}
	c.recordFailure(res.err)
	if err := c.writeStatus(ctx, r, obj, observed, nil, cond); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return result{err: err}
		}
		c.log.Warn("status refused, and so was the Ready condition saying why", "namespace", obj.GetNamespace(), "name", obj.GetName(), "err", err)
	}
	return res
}

// refused reports whether err is the server refusing a write for what it
// holds or who makes it (422, 400, 403, 413), rather than a conflict, a
// missing object, a busy server (429) or a failure of the server itself.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) ||
		apierrors.IsRequestEntityTooLargeError(err)
}

// apiMessage is the message of the API Status in err, or err's text.
func apiMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		if m := st.Status().Message; m != "" {
			return m
		}
	}
	return err.Error()
}

// FailureRecorder is implemented by a Reconciler that counts the failures of
// the writes the controller makes with its output (a refused status, refused
// children), so that they show where the plugin's own failures show.
type FailureRecorder interface {
	RecordFailure(err error)
}

// recordFailure counts err against the reconciler, if it counts failures.
func (c *Controller) recordFailure(err error) {
	if fr, ok := c.opts.Reconciler.(FailureRecorder); ok {
		fr.RecordFailure(err)
	}
}

func (c *Controller) callReconcile(ctx context.Context, req *abi.ReconcileRequest) (resp *abi.ReconcileResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("%w: %v", ErrPanic, p)
		}
	}()
	resp, err = c.opts.Reconciler.Reconcile(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	if resp == nil {
		return nil, errors.New("reconcile: no response")
	}
	return resp, nil
}

// observedChild is a child of the object in the cache, with its kind.
type observedChild struct {
	kind Kind
	obj  *unstructured.Unstructured
}

// observedChildren returns the cached objects obj controls.
func (c *Controller) observedChildren(r *run, obj *unstructured.Unstructured) []observedChild {
	var out []observedChild
	for i, inf := range r.children {
		for _, o := range inf.controlledBy(obj.GetUID()) {
			out = append(out, observedChild{kind: c.opts.Owns[i], obj: o})
		}
	}
	return out
}

func childrenByKind(observed []observedChild) map[string][]abi.RawJSON {
	if len(observed) == 0 {
		return nil
	}
	out := make(map[string][]abi.RawJSON)
	for _, o := range observed {
		b, err := encodeObject(o.obj.Object)
		if err != nil {
			continue
		}
		k := o.kind.ChildrenKey()
		out[k] = append(out[k], b)
	}
	return out
}

// terminalSeen remembers, by what they asked for (generation and content,
// see desiredState), the objects whose reconcile (or finalize) failed
// terminally in this run.
type terminalSeen struct {
	mu sync.Mutex
	at map[Key]desiredState
}

func newTerminalSeen() *terminalSeen { return &terminalSeen{at: map[Key]desiredState{}} }

// mark records that the reconcile of obj, which the caller no longer
// changes, failed terminally.
func (t *terminalSeen) mark(key Key, obj *unstructured.Unstructured) {
	d := desiredStateOf(obj)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.at[key] = d
}

// seen reports whether obj asks for what it asked for when marked.
func (t *terminalSeen) seen(key Key, obj *unstructured.Unstructured) bool {
	t.mu.Lock()
	d, ok := t.at[key]
	t.mu.Unlock()
	return ok && d.same(obj)
}

func (t *terminalSeen) forget(key Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.at, key)
}

// tooLarge tells whether err is the engine's answer to an object over the
// size bound (kube-apiserver's answer to etcd's "request is too large").
func tooLarge(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st) && st.Status().Code == http.StatusInternalServerError &&
		strings.Contains(st.Status().Message, "request is too large")
}
