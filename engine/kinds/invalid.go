package kinds

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds of a 422 Invalid answer, so that a hostile object's errors cannot
// make the answer (and the strings built for it) large.
const (
	// maxCauseBytes bounds the message of one cause (and its share of the
	// Status message): an enum's list of supported values, a large bad value.
	// 4 KiB, as Kubernetes bounds a container's termination message.
	maxCauseBytes = 4 << 10
	// maxCausesBytes bounds the causes together: once they pass it, each
	// further cause is cut to minCauseBytes.
	maxCausesBytes = 64 << 10
	minCauseBytes  = 256
	// MaxInvalidMessageBytes bounds the Status message, which repeats the
	// causes.
	MaxInvalidMessageBytes = 32 << 10
)

// newInvalid is apierrors.NewInvalid (the same Status, causes and message
// for a short list) with bounds: the first MaxValidationErrors distinct
// errors are kept and a last cause counts the others, each cause's message
// is cut to maxCauseBytes (minCauseBytes past maxCausesBytes of causes) and
// the Status message to MaxInvalidMessageBytes.
// The work is linear in the number of errors.
func newInvalid(gk schema.GroupKind, name string, errs field.ErrorList) *apierrors.StatusError {
	causes := make([]metav1.StatusCause, 0, min(len(errs), MaxValidationErrors+1))
	msgs := make([]string, 0, cap(causes))
	seen := make(map[string]bool, cap(causes))
	more, budget := 0, maxCausesBytes
	for _, e := range errs {
		if len(causes) >= MaxValidationErrors {
			more++
			continue
		}
		body := truncateMessage(e.ErrorBody(), max(min(maxCauseBytes, budget), minCauseBytes))
		budget -= len(body)
		msg := e.Field + ": " + body
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(e.Type), Message: body, Field: e.Field})
		if !seen[msg] { // the message lists each error once, as ToAggregate does
			seen[msg] = true
			msgs = append(msgs, msg)
		}
	}
	if more > 0 {
		note := fmt.Sprintf("too many errors: %d more not shown", more)
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Message: note})
		msgs = append(msgs, note)
	}
	message := fmt.Sprintf("%s %q is invalid", gk.String(), name)
	switch len(msgs) {
	case 0:
	case 1:
		message += ": " + msgs[0]
	default:
		message += ": [" + strings.Join(msgs, ", ") + "]"
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: truncateMessage(message, MaxInvalidMessageBytes),
		Details: &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name, Causes: causes},
	}}
}

// truncateMessage cuts s to at most max bytes (on a rune boundary) and says
// how much was cut, as client-go does with the bodies it logs.
func truncateMessage(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... [truncated %d chars]", len(s)-cut)
}
