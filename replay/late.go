package replay

import "github.com/agentstop/agentstop/termination"

// lateParents looks at the lines of a log held whole for what
// codec.Index.LateParent tells of a log read twice: what each run's
// first line says of its place (its parent and stage). The replay asks
// only for a parent whose first line has not come yet, which is a run
// that starts late. It returns nil for a log without parents.
func lateParents(events []termination.Event) func(run string) (parent, stage string, ok bool) {
	type start struct{ parent, stage string }
	first := map[string]start{}
	parents := false
	for i := range events {
		l := events[i].Logged()
		if _, seen := first[l.Run]; !seen {
			first[l.Run] = start{l.Parent, l.Stage}
			parents = parents || l.Parent != ""
		}
	}
	if !parents {
		return nil
	}
	return func(run string) (string, string, bool) {
		s, ok := first[run]
		return s.parent, s.stage, ok
	}
}
