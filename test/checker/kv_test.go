package checker

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func op(client int, call, ret int64, in Input, out Output) Operation {
	return Operation{Client: client, Input: in, Output: out, Call: call, Return: ret}
}

func TestCheckLinearizable(t *testing.T) {
	create := Input{Op: OpCreate, Key: 0, Value: "a"}
	update := Input{Op: OpUpdate, Key: 0, Value: "b", RV: "5"}
	get := Input{Op: OpGet, Key: 0}
	list := Input{Op: OpList}
	tests := []struct {
		name    string
		history []Operation
		ok      bool
	}{
		{"sequential", []Operation{
			op(0, 0, 1, create, Output{RV: "5"}),
			op(0, 2, 3, update, Output{RV: "6"}),
			op(1, 4, 5, get, Output{Obj: Obj{RV: "6", Value: "b"}}),
			op(1, 6, 7, list, Output{Items: map[int]Obj{0: {RV: "6", Value: "b"}}}),
			op(0, 8, 9, Input{Op: OpDelete, Key: 0}, Output{}),
			op(1, 10, 11, get, Output{Result: NotFound}),
		}, true},
		{"concurrent read may see either", []Operation{
			op(0, 0, 1, create, Output{RV: "5"}),
			op(0, 2, 5, update, Output{RV: "6"}),
			op(1, 3, 4, get, Output{Obj: Obj{RV: "5", Value: "a"}}),
		}, true},
		{"stale read", []Operation{
			op(0, 0, 1, create, Output{RV: "5"}),
			op(0, 2, 3, update, Output{RV: "6"}),
			op(1, 4, 5, get, Output{Obj: Obj{RV: "5", Value: "a"}}),
		}, false},
		{"stale list", []Operation{
			op(0, 0, 1, create, Output{RV: "5"}),
			op(0, 2, 3, update, Output{RV: "6"}),
			op(1, 4, 5, list, Output{Items: map[int]Obj{0: {RV: "5", Value: "a"}}}),
		}, false},
		{"lost acknowledged write", []Operation{
			op(0, 0, 1, create, Output{RV: "5"}),
			op(1, 2, 3, get, Output{Result: NotFound}),
		}, false},
		{"two updates on one precondition", []Operation{
			op(0, 0, 1, create, Output{RV: "5"}),
			op(0, 2, 3, update, Output{RV: "6"}),
			op(1, 2, 3, Input{Op: OpUpdate, Key: 0, Value: "c", RV: "5"}, Output{RV: "7"}),
		}, false},
		{"ambiguous create seen later", []Operation{
			op(0, 0, Infinity, create, Output{Result: Ambiguous}),
			op(1, 5, 6, get, Output{Obj: Obj{RV: "9", Value: "a"}}),
			op(1, 7, 8, Input{Op: OpUpdate, Key: 0, Value: "b", RV: "9"}, Output{RV: "10"}),
		}, true},
		{"ambiguous create never applied", []Operation{
			op(0, 0, Infinity, create, Output{Result: Ambiguous}),
			op(1, 5, 6, get, Output{Result: NotFound}),
		}, true},
		{"ambiguous read twice with different versions", []Operation{
			op(0, 0, Infinity, create, Output{Result: Ambiguous}),
			op(1, 5, 6, get, Output{Obj: Obj{RV: "9", Value: "a"}}),
			op(1, 7, 8, get, Output{Obj: Obj{RV: "8", Value: "a"}}),
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckLinearizable(tt.history, 10*time.Second)
			if tt.ok && err != nil {
				t.Fatalf("linearizable history flagged: %v", err)
			}
			if !tt.ok && !errors.Is(err, ErrNotLinearizable) {
				t.Fatalf("broken history passed: %v", err)
			}
		})
	}
}

// TestCheckLinearizableTimeout checks that a history whose search outlasts
// the timeout comes back unknown, promptly, rather than as passed, failed
// or never: twenty writes of unknown outcome, all concurrent, then a read
// no write explains, make porcupine try every order.
func TestCheckLinearizableTimeout(t *testing.T) {
	var h []Operation
	for i := range 20 {
		in := Input{Op: OpUpdate, Key: i % MaxKeys, Value: fmt.Sprint("v", i), RV: "1"}
		if i%3 == 0 {
			in = Input{Op: OpCreate, Key: i % MaxKeys, Value: fmt.Sprint("v", i)}
		}
		h = append(h, op(i, int64(i), Infinity, in, Output{Result: Ambiguous}))
	}
	h = append(h, op(20, 1000, 1001, Input{Op: OpGet, Key: 0}, Output{Obj: Obj{RV: "5", Value: "never written"}}))
	start := time.Now()
	err := CheckLinearizable(h, 200*time.Millisecond)
	if !errors.Is(err, ErrUnknown) {
		t.Fatalf("got %v, want ErrUnknown", err)
	}
	if errors.Is(err, ErrNotLinearizable) {
		t.Fatalf("an unknown result also reads as a violation: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the check took %v with a 200ms timeout", d)
	}
}
