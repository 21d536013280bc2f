package termination

// precedes orders two causes that fired on one event: by the contract's
// precedence (rank), then within a kind: BudgetExhausted and BudgetPressure
// by resource, the overall MaxToolCallsReached before a per-tool one,
// StallDetected by signal. It returns < 0 when a goes first; 0 keeps
// firing order.
func precedes(a, b Cause) int {
	if d := rank(a) - rank(b); d != 0 {
		return d
	}
	return subRank(a) - subRank(b)
}

func subRank(c Cause) int {
	switch c := c.(type) {
	case BudgetExhausted:
		return resourceRank(c.Resource)
	case BudgetPressure:
		return resourceRank(c.Resource)
	case MaxToolCallsReached:
		if c.Tool != "" {
			return 1
		}
	case StallDetected:
		return signalRank(c.Signal)
	case Timeout:
		if c.Idle {
			return 1 // a timeout before an idle limit that fired with it
		}
	}
	return 0
}

// warningOrder orders warnings recorded on one event: BudgetPressure by
// resource, then StallDetected by signal, then anything else.
func warningOrder(a, b Cause) int { return warningRank(a) - warningRank(b) }

func warningRank(c Cause) int {
	switch c := c.(type) {
	case BudgetPressure:
		return resourceRank(c.Resource)
	case StallDetected:
		return 10 + signalRank(c.Signal)
	}
	return 20
}

// resourceRank is the contract's order of resources: total_tokens,
// input_tokens, output_tokens, cost, iterations, tool_calls.
func resourceRank(r Resource) int {
	switch r {
	case ResourceTotalTokens:
		return 0
	case ResourceInputTokens:
		return 1
	case ResourceOutputTokens:
		return 2
	case ResourceCost:
		return 3
	case ResourceIterations:
		return 4
	case ResourceToolCalls:
		return 5
	}
	return 6
}

// signalRank is the contract's order of stall signals: repeated_tool_call,
// repeated_result, repeated_message, cycle, token_plateau.
func signalRank(s StallSignal) int {
	switch s {
	case SignalRepeatedToolCall:
		return 0
	case SignalRepeatedResult:
		return 1
	case SignalRepeatedMessage:
		return 2
	case SignalCycle:
		return 3
	case SignalTokenPlateau:
		return 4
	}
	return 5
}
