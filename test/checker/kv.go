package checker

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// MaxKeys is the most objects one history may touch; the model keeps its
// state in a fixed array so that states compare with ==.
const MaxKeys = 4

// Unknown is the resourceVersion the model holds for an object written by
// an operation whose outcome is unknown: the next read pins it.
const Unknown = "?"

// Op names an operation of the key-value model.
type Op int

// The operations of the model.
const (
	OpCreate Op = iota
	OpGet
	OpUpdate
	OpDelete
	OpList
)

func (o Op) String() string {
	return [...]string{"create", "get", "update", "delete", "list"}[o]
}

// Input is what a client asked for. Key indexes the history's keys; Value is
// unique per write, so that a read shows which write it saw.
type Input struct {
	Op    Op
	Key   int
	Value string
	// RV is an update's resourceVersion precondition.
	RV string
}

// Result is how an operation ended.
type Result int

// The results an operation may have.
const (
	// OK: created, found, updated, deleted or listed.
	OK Result = iota
	// NotFound: 404.
	NotFound
	// Conflict: 409, AlreadyExists for a create, a stale precondition for
	// an update.
	Conflict
	// Ambiguous: the server died or the connection broke before an answer;
	// the operation may or may not have taken effect.
	Ambiguous
)

// Obj is one object as a read saw it.
type Obj struct {
	RV    string
	Value string
}

// Output is what the server answered.
type Output struct {
	Result Result
	// RV is the resourceVersion a create or update returned.
	RV string
	// Obj is what a get found.
	Obj Obj
	// Items is what a list found, by key.
	Items map[int]Obj
}

// Operation is one recorded call: Call and Return are nanoseconds since the
// history began. An ambiguous operation has Return Infinity.
type Operation struct {
	Client int
	Input  Input
	Output Output
	Call   int64
	Return int64
}

// Infinity is the return time of an operation whose outcome is unknown:
// it may take effect at any point after its call, or never.
const Infinity = int64(math.MaxInt64)

type slot struct {
	exists bool
	rv     string
	value  string
}

type state [MaxKeys]slot

// readMatches reports whether a read of s that saw o is possible, and the
// state with an Unknown resourceVersion pinned to what the read saw.
func readMatches(s slot, o Obj) (bool, slot) {
	if !s.exists || s.value != o.Value {
		return false, s
	}
	if s.rv == Unknown {
		s.rv = o.RV
		return true, s
	}
	return s.rv == o.RV, s
}

// step returns every state the model may be in after op ran on s with the
// given output; none when the output is impossible.
func step(s state, in Input, out Output) []state {
	if out.Result == Ambiguous {
		// Either it never happened, or it happened with some outcome.
		next := []state{s}
		switch in.Op {
		case OpCreate:
			if !s[in.Key].exists {
				n := s
				n[in.Key] = slot{exists: true, rv: Unknown, value: in.Value}
				next = append(next, n)
			}
		case OpUpdate:
			if s[in.Key].exists && s[in.Key].rv == in.RV {
				n := s
				n[in.Key] = slot{exists: true, rv: Unknown, value: in.Value}
				next = append(next, n)
			}
		case OpDelete:
			if s[in.Key].exists {
				n := s
				n[in.Key] = slot{}
				next = append(next, n)
			}
		}
		return next
	}
	cur := s[in.Key]
	switch in.Op {
	case OpCreate:
		switch out.Result {
		case OK:
			if cur.exists {
				return nil
			}
			s[in.Key] = slot{exists: true, rv: out.RV, value: in.Value}
			return []state{s}
		case Conflict:
			if cur.exists {
				return []state{s}
			}
		}
	case OpGet:
		switch out.Result {
		case OK:
			if ok, pinned := readMatches(cur, out.Obj); ok {
				s[in.Key] = pinned
				return []state{s}
			}
		case NotFound:
			if !cur.exists {
				return []state{s}
			}
		}
	case OpUpdate:
		switch out.Result {
		case OK:
			if !cur.exists || cur.rv != in.RV {
				return nil
			}
			s[in.Key] = slot{exists: true, rv: out.RV, value: in.Value}
			return []state{s}
		case Conflict:
			// An Unknown resourceVersion is one no client has seen, so a
			// precondition cannot name it.
			if cur.exists && cur.rv != in.RV {
				return []state{s}
			}
		case NotFound:
			if !cur.exists {
				return []state{s}
			}
		}
	case OpDelete:
		switch out.Result {
		case OK:
			if cur.exists {
				s[in.Key] = slot{}
				return []state{s}
			}
		case NotFound:
			if !cur.exists {
				return []state{s}
			}
		}
	case OpList:
		if out.Result != OK {
			return nil
		}
		for k := range MaxKeys {
			o, found := out.Items[k]
			if found != s[k].exists {
				return nil
			}
			if !found {
				continue
			}
			ok, pinned := readMatches(s[k], o)
			if !ok {
				return nil
			}
			s[k] = pinned
		}
		return []state{s}
	}
	return nil
}

// KVModel is the sequential specification of a map of objects with
// resourceVersions: a create fails on an existing object, an update
// succeeds only when its precondition names the current resourceVersion,
// a read returns the last write, and a list returns every object at one
// point in time.
var KVModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{state{}} },
	Step: func(st, in, out any) []any {
		var next []any
		for _, n := range step(st.(state), in.(Input), out.(Output)) {
			next = append(next, n)
		}
		return next
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(Input), out.(Output)
		return fmt.Sprintf("%s(k%d %s %s) -> %d %s %v %v", i.Op, i.Key, i.Value, i.RV, o.Result, o.RV, o.Obj, o.Items)
	},
	DescribeState: func(st any) string {
		var b strings.Builder
		for k, s := range st.(state) {
			if s.exists {
				fmt.Fprintf(&b, "k%d=%s@%s ", k, s.value, s.rv)
			}
		}
		return b.String()
	},
}

// CheckLinearizable checks a history against KVModel within timeout (0 for
// none). It returns nil when the history is linearizable, an error wrapping
// ErrNotLinearizable when it is not, and one wrapping ErrUnknown when the
// search timed out: porcupine's search is exponential in the worst case,
// and an unlucky history must not hang the run nor pass unchecked.
func CheckLinearizable(history []Operation, timeout time.Duration) error {
	for _, op := range history {
		if op.Input.Key < 0 || op.Input.Key >= MaxKeys {
			return fmt.Errorf("checker: key %d outside the model's %d keys", op.Input.Key, MaxKeys)
		}
	}
	ops := make([]porcupine.Operation, 0, len(history))
	for _, op := range history {
		ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: op.Input, Output: op.Output, Call: op.Call, Return: op.Return})
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	switch res := porcupine.CheckOperationsTimeout(KVModel.ToModel(), ops, timeout); res {
	case porcupine.Ok:
		return nil
	case porcupine.Illegal:
		return fmt.Errorf("%w: history of %d operations", ErrNotLinearizable, len(history))
	default:
		return fmt.Errorf("%w: %d operations, no answer within %s", ErrUnknown, len(history), timeout)
	}
}
