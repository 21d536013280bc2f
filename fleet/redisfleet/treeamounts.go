package redisfleet

import (
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/termination"
)

// treeResources are the resources a shared tree counts, in the order the
// fleets keep them.
var treeResources = [...]termination.Resource{
	termination.ResourceIterations, termination.ResourceToolCalls,
	termination.ResourceTotalTokens, termination.ResourceInputTokens, termination.ResourceOutputTokens,
	termination.ResourceCost,
}

// amountsOf returns u per resource, in treeResources' order.
func amountsOf(u tree.Usage) [6]float64 {
	return [6]float64{float64(u.Iterations), float64(u.ToolCalls),
		float64(u.Tokens.InputTokens + u.Tokens.OutputTokens), float64(u.Tokens.InputTokens), float64(u.Tokens.OutputTokens), u.Cost}
}

// usageFrom is amountsOf's inverse (total tokens are implied by input and
// output; what finals spent is not told apart).
func usageFrom(a [6]float64) tree.Usage {
	return tree.Usage{Totals: termination.Totals{Iterations: int(a[0]), ToolCalls: int(a[1]), Tokens: termination.Usage{InputTokens: int64(a[3]), OutputTokens: int64(a[4])}, Cost: a[5]}}
}

// limitsOf returns spec's limits per resource, in treeResources'
// order: 0 for a resource it does not limit.
func limitsOf(l termination.Limits) [6]float64 {
	var out [6]float64
	set := func(i int, bit termination.LimitMask, v float64) {
		if l.Has&bit != 0 {
			out[i] = v
		}
	}
	set(0, termination.LimitIterations, float64(l.Iterations))
	set(1, termination.LimitToolCalls, float64(l.ToolCalls))
	set(2, termination.LimitTotalTokens, float64(l.TotalTokens))
	set(3, termination.LimitInputTokens, float64(l.InputTokens))
	set(4, termination.LimitOutputTokens, float64(l.OutputTokens))
	set(5, termination.LimitCost, l.Cost)
	return out
}
