package checker

import (
	"strings"
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
			if !tt.ok && (err == nil || !strings.Contains(err.Error(), "not linearizable")) {
				t.Fatalf("broken history passed: %v", err)
			}
		})
	}
}
