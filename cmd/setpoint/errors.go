package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Exit codes scripts can rely on. They are listed in the root command's help.
const (
	exitOK          = 0
	exitFailure     = 1 // anything not below
	exitUsage       = 2 // bad flags, arguments (selectors included) or configuration
	exitUnreachable = 3 // the server could not be reached
	exitNotFound    = 4 // the object or resource does not exist
	exitConflict    = 5 // changed since read (409 Conflict) or already exists
	exitInvalid     = 6 // the server rejected the object as invalid (422), or a manifest does not parse
	exitDenied      = 7 // 401 or 403: wrong or missing credentials, or not allowed
)

const exitCodeHelp = `Exit codes:
  0  success
  1  other errors
  2  bad flags, arguments (selectors included) or configuration
  3  the server could not be reached
  4  not found
  5  conflict: the object changed since it was read, or already exists
  6  invalid: a manifest that does not parse, or an object the server rejected
  7  unauthorized or forbidden`

// codedError carries an exit code.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// exitError attaches an exit code to err.
func exitError(code int, err error) error {
	if err == nil {
		return nil
	}
	return &codedError{code: code, err: err}
}

// exitCode is the process exit code for err.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "required flag"} {
		if strings.HasPrefix(msg, p) {
			return exitUsage
		}
	}
	return exitFailure
}

// usageError marks err as a mistake in how the command was called.
func usageError(format string, args ...any) error {
	return exitError(exitUsage, fmt.Errorf(format, args...))
}

// explain turns a client error into one a person can act on, with an exit
// code: an unreachable server names the address tried, a 409 says the object
// changed since it was read (unless it is a server-side apply conflict), a
// 422 lists each field.
func (c *client) explain(err error) error {
	if err == nil {
		return nil
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return err
	}
	host := c.config.Host
	var status apierrors.APIStatus
	if u, perr := url.Parse(host); perr == nil && u.Scheme == "http" &&
		(errors.As(err, &status) && status.Status().Code == 400 || strings.Contains(err.Error(), "unknown reason")) {
		// An HTTPS server answers plain HTTP with a bare 400.
		return exitError(exitUsage, fmt.Errorf("the server at %s speaks HTTPS: use https://%s (set by --server, %s or the kubeconfig)", host, u.Host, envServer))
	}
	if errors.As(err, &status) {
		return explainStatus(status.Status(), err)
	}
	var uerr *url.Error
	var netErr *net.OpError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.As(err, &unknownCA):
		return exitError(exitUnreachable, fmt.Errorf("cannot trust the server at %s: its certificate is signed by an unknown authority; use the kubeconfig `setpoint server` wrote (it holds the CA) or --certificate-authority", host))
	case errors.As(err, &hostErr):
		return exitError(exitUnreachable, fmt.Errorf("cannot trust the server at %s: %v", host, hostErr))
	case errors.Is(err, syscall.ECONNREFUSED):
		return exitError(exitUnreachable, fmt.Errorf("cannot reach the server at %s: connection refused; is `setpoint server` running there? (set by --server, %s or the kubeconfig)", host, envServer))
	case errors.As(err, &netErr), errors.As(err, &uerr) && (uerr.Timeout() || errors.Is(uerr.Err, io.EOF)):
		return exitError(exitUnreachable, fmt.Errorf("cannot reach the server at %s: %w", host, err))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return exitError(exitUnreachable, fmt.Errorf("the server at %s did not answer in time: %w", host, err))
	}
	return err
}

func explainStatus(st metav1.Status, err error) error {
	msg := st.Message
	if msg == "" {
		msg = err.Error()
	}
	switch {
	case fieldManagerConflict(st):
		// Server-side apply: fields other managers own, not a stale read.
		// The command that applied says how to take them over.
		return exitError(exitConflict, errors.New(msg))
	case st.Reason == metav1.StatusReasonConflict:
		return exitError(exitConflict, fmt.Errorf("%s\nThe object was changed since you read it (its resourceVersion is stale): read it again, reapply your change, and retry", msg))
	case st.Reason == metav1.StatusReasonAlreadyExists:
		return exitError(exitConflict, errors.New(msg))
	case st.Code == 404 || st.Reason == metav1.StatusReasonNotFound:
		return exitError(exitNotFound, errors.New(msg))
	case st.Code == 401:
		return exitError(exitDenied, errors.New("the server rejected the credentials (401 Unauthorized): check --token, "+envToken+" or the kubeconfig's token"))
	case st.Code == 403:
		return exitError(exitDenied, fmt.Errorf("forbidden: %s", msg))
	case st.Reason == metav1.StatusReasonInvalid || st.Code == 422:
		return exitError(exitInvalid, errors.New(invalidMessage(st)))
	case st.Code == 400:
		return exitError(exitInvalid, errors.New(msg))
	}
	return errors.New(msg)
}

// fieldManagerConflict tells a server-side apply conflict (409 whose causes
// are FieldManagerConflict: the fields other field managers own) from a 409
// for a stale resourceVersion.
func fieldManagerConflict(st metav1.Status) bool {
	if st.Reason != metav1.StatusReasonConflict || st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			return true
		}
	}
	return false
}

// isFieldManagerConflict is fieldManagerConflict for a client error.
func isFieldManagerConflict(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && fieldManagerConflict(status.Status())
}

// invalidMessage lists each field the server rejected, one per line.
func invalidMessage(st metav1.Status) string {
	var b strings.Builder
	what := "the object"
	if st.Details != nil && st.Details.Name != "" {
		kind := st.Details.Kind
		if st.Details.Group != "" {
			kind += "." + st.Details.Group
		}
		what = fmt.Sprintf("%s %q", kind, st.Details.Name)
	}
	if st.Details == nil || len(st.Details.Causes) == 0 {
		return st.Message
	}
	fmt.Fprintf(&b, "%s is invalid:", what)
	for _, c := range st.Details.Causes {
		field := c.Field
		if field == "" || field == "<nil>" {
			field = "(object)"
		}
		fmt.Fprintf(&b, "\n  - %s: %s", field, c.Message)
	}
	return b.String()
}
