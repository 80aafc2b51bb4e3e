package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/rest"
)

// tableAccept asks for a meta/v1 Table and takes JSON when the server has none.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// getRaw GETs path (with query) with the Accept header given and returns the
// body; a failure status becomes an API status error, as client-go's are.
func (c *client) getRaw(ctx context.Context, path string, query url.Values, accept string) ([]byte, error) {
	hc, err := rest.HTTPClientFor(c.config)
	if err != nil {
		return nil, fmt.Errorf("HTTP client: %w", err)
	}
	if c.config.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.config.Timeout)
		defer cancel()
	}
	u := strings.TrimRight(c.config.Host, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.config.UserAgent)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		var st metav1.Status
		if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
			return nil, &apierrors.StatusError{ErrStatus: st}
		}
		return nil, apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodGet, schema.GroupResource{}, "", strings.TrimSpace(string(body)), 0, false)
	}
	return body, nil
}

// resourcePath is the REST path of r in ns (all namespaces when empty), and of
// the object name when given.
func resourcePath(r resource, ns, name string) string {
	p := "/apis/" + r.gvr.Group + "/" + r.gvr.Version
	if r.gvr.Group == "" {
		p = "/api/" + r.gvr.Version
	}
	if r.namespaced && ns != "" {
		p += "/namespaces/" + url.PathEscape(ns)
	}
	p += "/" + r.gvr.Resource
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return path.Clean(p)
}

// table fetches the server's Table for r (one object when name is set).
func (c *client) table(ctx context.Context, r resource, ns, name string, opts metav1.ListOptions) (*metav1.Table, error) {
	q := url.Values{"includeObject": {"Metadata"}}
	if opts.LabelSelector != "" {
		q.Set("labelSelector", opts.LabelSelector)
	}
	if opts.FieldSelector != "" {
		q.Set("fieldSelector", opts.FieldSelector)
	}
	body, err := c.getRaw(ctx, resourcePath(r, ns, name), q, tableAccept)
	if err != nil {
		return nil, c.explain(err)
	}
	var t metav1.Table
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, fmt.Errorf("decode the server's table: %w", err)
	}
	if t.Kind != "Table" {
		return fallbackTable(body, name != "")
	}
	return &t, nil
}

// fallbackTable builds a NAME and AGE table from a plain object or list, for
// servers that do not answer with a Table.
func fallbackTable(body []byte, single bool) (*metav1.Table, error) {
	var items []json.RawMessage
	if single {
		items = []json.RawMessage{body}
	} else {
		var list struct{ Items []json.RawMessage }
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, fmt.Errorf("decode list: %w", err)
		}
		items = list.Items
	}
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string"}}}
	for _, it := range items {
		var m struct{ Metadata metav1.ObjectMeta }
		if err := json.Unmarshal(it, &m); err != nil {
			return nil, fmt.Errorf("decode object: %w", err)
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{m.Metadata.Name}, Object: runtime.RawExtension{Raw: it}})
	}
	return t, nil
}

// rowMeta is what the printer needs from a row's object.
type rowMeta struct {
	namespace string
	name      string
	labels    map[string]string
	created   time.Time
	known     bool
}

func metaOf(row metav1.TableRow) rowMeta {
	raw := row.Object.Raw
	if len(raw) == 0 && row.Object.Object != nil {
		raw, _ = json.Marshal(row.Object.Object)
	}
	var m struct{ Metadata metav1.ObjectMeta }
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return rowMeta{}
	}
	return rowMeta{namespace: m.Metadata.Namespace, name: m.Metadata.Name, labels: m.Metadata.Labels,
		created: m.Metadata.CreationTimestamp.Time, known: true}
}

// tablePrinter prints rows of tables aligned in columns; it remembers the
// column widths so that rows printed later (by a watch) line up.
type tablePrinter struct {
	w             io.Writer
	wide          bool
	withNamespace bool
	withEvent     bool
	showLabels    bool
	noHeaders     bool
	now           func() time.Time

	widths  []int
	printed bool // the header is out
}

// header and cells of a table as this printer shows them.
func (p *tablePrinter) layout(t *metav1.Table) (header []string, rows [][]string) {
	var keep []int
	hasAge := false
	for i, col := range t.ColumnDefinitions {
		if col.Priority > 0 && !p.wide {
			continue
		}
		keep = append(keep, i)
		if strings.EqualFold(col.Name, "age") {
			hasAge = true
		}
	}
	if p.withEvent {
		header = append(header, "EVENT")
	}
	if p.withNamespace {
		header = append(header, "NAMESPACE")
	}
	for _, i := range keep {
		header = append(header, strings.ToUpper(t.ColumnDefinitions[i].Name))
	}
	if !hasAge {
		header = append(header, "AGE")
	}
	if p.showLabels {
		header = append(header, "LABELS")
	}
	for _, row := range t.Rows {
		m := metaOf(row)
		var cells []string
		if p.withEvent {
			cells = append(cells, "")
		}
		if p.withNamespace {
			cells = append(cells, m.namespace)
		}
		for _, i := range keep {
			var v any
			if i < len(row.Cells) {
				v = row.Cells[i]
			}
			cells = append(cells, p.cell(v, t.ColumnDefinitions[i]))
		}
		if !hasAge {
			age := "<unknown>"
			if m.known && !m.created.IsZero() {
				age = duration.HumanDuration(p.now().Sub(m.created))
			}
			cells = append(cells, age)
		}
		if p.showLabels {
			cells = append(cells, labelsString(m.labels))
		}
		rows = append(rows, cells)
	}
	return header, rows
}

func (p *tablePrinter) cell(v any, col metav1.TableColumnDefinition) string {
	switch x := v.(type) {
	case nil:
		return "<none>"
	case string:
		if col.Type == "date" || col.Format == "date-time" {
			if ts, err := time.Parse(time.RFC3339, x); err == nil {
				return duration.HumanDuration(p.now().Sub(ts))
			}
		}
		if x == "" {
			return "<none>"
		}
		return strings.ReplaceAll(x, "\n", " ")
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}

// print prints t's rows, with the header the first time; event, when set,
// fills the EVENT column.
func (p *tablePrinter) print(t *metav1.Table, event string) error {
	header, rows := p.layout(t)
	if p.withEvent {
		for _, r := range rows {
			r[0] = event
		}
	}
	all := rows
	if !p.printed && !p.noHeaders {
		all = append([][]string{header}, rows...)
	}
	for _, r := range all {
		for i, c := range r {
			n := utf8.RuneCountInString(c)
			if i >= len(p.widths) {
				p.widths = append(p.widths, n)
			} else if n > p.widths[i] {
				p.widths[i] = n
			}
		}
	}
	p.printed = true
	var b strings.Builder
	for _, r := range all {
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", p.widths[i]-utf8.RuneCountInString(c)+3))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(p.w, b.String())
	return err
}

// labelsString prints labels as kubectl's --show-labels does: k=v,k2=v2
// sorted, or <none>.
func labelsString(l map[string]string) string { return joinKeyValues(l, ",") }

// joinKeyValues prints m as k=v pairs sorted by key and joined by sep, or
// <none> when m is empty, as kubectl prints labels and annotations.
func joinKeyValues(m map[string]string, sep string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, sep)
}
