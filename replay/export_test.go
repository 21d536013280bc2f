package replay

// KeptState returns the id of a run of r that has not ended or keeps its
// evaluation state after it ended ("" when none does, ok false), and how
// long r's list of live runs is, for tests of what a Runner keeps.
func KeptState(r *Runner) (run string, ok bool, order int) {
	for _, x := range r.rp.runs {
		if !(x.ended && x.eval == nil && x.limits == nil && x.children == nil) {
			return x.id, true, len(r.rp.order)
		}
	}
	return "", false, len(r.rp.order)
}
