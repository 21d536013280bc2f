package evalhooks

import (
	"testing"
	"time"
)

func TestGetReturnsWhatSetPublished(t *testing.T) {
	saved := hooks
	t.Cleanup(func() { hooks = saved })
	Set(Hooks[*int, string, error, bool]{
		Timeouts: func(c bool) []time.Duration {
			if c {
				return []time.Duration{time.Second}
			}
			return nil
		},
	})
	h := Get[*int, string, error, bool]()
	if got := h.Timeouts(true); len(got) != 1 || got[0] != time.Second {
		t.Fatalf("Timeouts(true) = %v, want [1s]", got)
	}
}

func TestGetPanicsOnOtherTypes(t *testing.T) {
	saved := hooks
	t.Cleanup(func() { hooks = saved })
	Set(Hooks[*int, string, error, bool]{})
	defer func() {
		if recover() == nil {
			t.Fatal("Get with other type arguments did not panic")
		}
	}()
	Get[*int, string, error, int]()
}
