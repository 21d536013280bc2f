package middleware

import "testing"

// TestWorkPoolKeepsAFew: a work given back is taken again (the last one
// first), and the pool keeps at most its capacity of spares: the rest is
// left to the garbage collector.
func TestWorkPoolKeepsAFew(t *testing.T) {
	type item struct{ n int }
	p := poolOf[item]()
	if q := poolOf[item](); q != p {
		t.Fatal("two pools for one item type")
	}
	if poolOf[int]() == any(p) {
		t.Fatal("one pool for two item types")
	}
	w := p.get()
	w.item.n = 7
	p.put(w)
	if got := p.get(); got != w {
		t.Fatalf("get after put = %p, want the work given back %p", got, w)
	}
	limit := cap(p.spare) + 1 // the spares and the last one
	works := make([]*work[item], 3*limit)
	for i := range works {
		works[i] = p.get()
	}
	for _, w := range works {
		p.put(w)
	}
	if n := len(p.spare); n != cap(p.spare) {
		t.Fatalf("%d spares kept, want %d", n, cap(p.spare))
	}
	kept := map[*work[item]]bool{}
	for range limit {
		kept[p.get()] = true
	}
	if len(kept) != limit {
		t.Fatalf("%d distinct spares taken back, want %d", len(kept), limit)
	}
	if w := p.get(); kept[w] {
		t.Fatal("a spare was handed out twice")
	}
}
