package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func labels(name string) string {
	if name == "a-long-name" {
		return `,"labels":{"env":"dev","app":"w"}`
	}
	return ""
}

func TestTablePrinter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	row := func(ns, name string, age time.Duration, cells ...any) metav1.TableRow {
		created := now.Add(-age).Format(time.RFC3339)
		return metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Raw: []byte(
			`{"metadata":{"namespace":"` + ns + `","name":"` + name + `","creationTimestamp":"` + created + `"` + labels(name) + `}}`)}}
	}
	table := &metav1.Table{
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string"}, {Name: "Size", Type: "string"}, {Name: "Replicas", Type: "integer"},
			{Name: "Color", Type: "string", Priority: 1},
		},
		Rows: []metav1.TableRow{
			row("default", "a-long-name", 90*time.Second, "a-long-name", "small", float64(3), "blue"),
			row("prod", "b", 49*time.Hour, "b", nil, float64(10), ""),
		},
	}
	tests := []struct {
		name string
		p    tablePrinter
		want string
	}{
		{name: "plain, AGE added", p: tablePrinter{},
			want: "NAME          SIZE     REPLICAS   AGE\n" +
				"a-long-name   small    3          90s\n" +
				"b             <none>   10         2d1h\n"},
		{name: "wide with namespace", p: tablePrinter{wide: true, withNamespace: true},
			want: "NAMESPACE   NAME          SIZE     REPLICAS   COLOR    AGE\n" +
				"default     a-long-name   small    3          blue     90s\n" +
				"prod        b             <none>   10         <none>   2d1h\n"},
		{name: "labels", p: tablePrinter{showLabels: true},
			want: "NAME          SIZE     REPLICAS   AGE    LABELS\n" +
				"a-long-name   small    3          90s    app=w,env=dev\n" +
				"b             <none>   10         2d1h   <none>\n"},
		{name: "no headers", p: tablePrinter{noHeaders: true},
			want: "a-long-name   small    3    90s\n" +
				"b             <none>   10   2d1h\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			p := tt.p
			p.w, p.now = &b, func() time.Time { return now }
			if err := p.print(table, ""); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestTablePrinterKeepsAgeColumnAndWidthsAcrossCalls(t *testing.T) {
	var b bytes.Buffer
	p := &tablePrinter{w: &b, withEvent: true, now: time.Now}
	tbl := func(name string) *metav1.Table {
		return &metav1.Table{
			ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name"}, {Name: "Age", Type: "date"}},
			Rows:              []metav1.TableRow{{Cells: []any{name, "5m"}}},
		}
	}
	_ = p.print(tbl("short"), "ADDED")
	_ = p.print(tbl("x"), "DELETED")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || lines[0] != "EVENT   NAME    AGE" || lines[1] != "ADDED   short   5m" || !strings.HasPrefix(lines[2], "DELETED   x") {
		t.Errorf("got:\n%s", b.String())
	}
}

func TestParseOutput(t *testing.T) {
	for _, tt := range []struct {
		in, format string
		code       int
	}{
		{"", "table", 0}, {"wide", "wide", 0}, {"yaml", "yaml", 0}, {"json", "json", 0}, {"name", "name", 0},
		{"jsonpath={.spec.size}", "jsonpath", 0}, {"jsonpath=.spec.size", "jsonpath", 0},
		{"jsonpath=", "", exitUsage}, {"jsonpath={.a", "", exitUsage}, {"xml", "", exitUsage},
	} {
		o, err := parseOutput(tt.in)
		if exitCode(err) != tt.code || o.format != tt.format {
			t.Errorf("parseOutput(%q) = %q, %v", tt.in, o.format, err)
		}
	}
}
