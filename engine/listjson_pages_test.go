package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestListJSONPages checks that a full list read in pages gives every
// object once, in order, at one revision, and that pages after the first
// shrink to the byte budget as the objects' size predicts.
func TestListJSONPages(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	for i := range 7 {
		mustCreate(t, s, widget(fmt.Sprintf("w%d", i), "small", nil))
	}
	whole, err := s.ListJSON(ctx, widgets, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		budget    int64
		wantSizes []int
	}{
		{name: "by count", budget: 4 << 20, wantSizes: []int{3, 3, 1}},
		{name: "by bytes", budget: 1, wantSizes: []int{3, 1, 1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.listPageBytes = tc.budget
			var sizes []int
			var items [][]byte
			rvs := map[string]bool{}
			err := s.ListJSONPages(ctx, widgets, "default", metav1.ListOptions{}, 3, func(l *JSONList) error {
				sizes = append(sizes, len(l.Items))
				items = append(items, l.Items...)
				rvs[l.ResourceVersion] = true
				if l.Continue != "" {
					t.Errorf("a page carries a continue token")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sizes, tc.wantSizes) {
				t.Errorf("page sizes %v, want %v", sizes, tc.wantSizes)
			}
			if len(rvs) != 1 || !rvs[whole.ResourceVersion] {
				t.Errorf("pages at revisions %v, want all at %s", rvs, whole.ResourceVersion)
			}
			if !slices.EqualFunc(items, whole.Items, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Errorf("pages hold %d items, not the %d of the whole list in order", len(items), len(whole.Items))
			}
		})
	}
}
