package termination

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseFleetBudget(t *testing.T) {
	p, err := ParsePolicy([]byte("max_iterations: 3\nfleet_budget:\n  key: label:tenant\n  window: 1h\n  total_tokens: 2000000\n  cost: 50\n  pressure: 0.8\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := p.FleetBudget()
	want := FleetBudget{Key: "label:tenant", Window: time.Hour, TotalTokens: 2000000, Cost: 50, Pressure: 0.8}
	if got == nil || *got != want {
		t.Fatalf("FleetBudget() = %+v, want %+v", got, want)
	}
	if name, ok := got.Label(); !ok || name != "tenant" {
		t.Errorf("Label() = %q, %v", name, ok)
	}
	if p.Condition().String() != (IterationLimits{Limit: 3}).String() {
		t.Errorf("condition = %s, want the max_iterations alone", p.Condition())
	}
	if q := MustParsePolicy("max_iterations: 3"); q.FleetBudget() != nil {
		t.Errorf("policy without fleet_budget has %+v", q.FleetBudget())
	}
	only := MustParsePolicy("fleet_budget: {key: stage, window: 1s, input_tokens: 5}")
	if b := only.FleetBudget(); b == nil || b.Key != "stage" || b.InputTokens != 5 {
		t.Errorf("fleet_budget alone = %+v", b)
	}
}

func TestParseFleetBudgetErrors(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{"any: [{fleet_budget: {key: stage, window: 1h, cost: 1}}]", "policy.any[0].fleet_budget: allowed only at the top level"},
		{"all: [{max_iterations: 2, fleet_budget: {key: stage, window: 1h, cost: 1}}]", "policy.all[0].fleet_budget: allowed only at the top level"},
		{"fleet_budget: {window: 1h, cost: 1}", "policy.fleet_budget.key: is required"},
		{"fleet_budget: {key: stage, cost: 1}", "policy.fleet_budget.window: is required"},
		{"fleet_budget: {key: tenant, window: 1h, cost: 1}", `policy.fleet_budget.key: must be "stage" or "label:NAME", got "tenant"`},
		{"fleet_budget: {key: 'label:Tenant', window: 1h, cost: 1}", `policy.fleet_budget.key: label name "Tenant" must be snake_case`},
		{"fleet_budget: {key: stage, window: 500ms, cost: 1}", "policy.fleet_budget.window: must be at least 1s, got 500ms"},
		{"fleet_budget: {key: stage, window: 1h}", "policy.fleet_budget: needs at least one of total_tokens, input_tokens, output_tokens, cost"},
		{"fleet_budget: {key: stage, window: 1h, total_tokens: 0}", "policy.fleet_budget.total_tokens: must be a positive int, got 0"},
		{"fleet_budget: {key: stage, window: 1h, cost: -1}", "policy.fleet_budget.cost: must be > 0"},
		{"fleet_budget: {key: stage, window: 1h, cost: 1, pressure: 1}", "policy.fleet_budget.pressure: must be in (0,1), got 1"},
		{"fleet_budget: {key: stage, window: 1h, cost: 1, limit: 2}", `policy.fleet_budget.limit: unknown key`},
		{"fleet_budgets: {key: stage}", `policy.fleet_budgets: unknown key (did you mean "fleet_budget"?)`},
		{"fleet_budget: 5", "policy.fleet_budget: must be a mapping"},
	} {
		_, err := ParsePolicy([]byte(tc.policy))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePolicy(%q) = %v, want an error containing %q", tc.policy, err, tc.want)
		}
	}
}

func TestFleetBudgetMismatchAndJSON(t *testing.T) {
	a := FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 100, Pressure: 0.5}
	if m := a.Mismatch(a); m != "" {
		t.Errorf("Mismatch(self) = %q", m)
	}
	b := a
	b.TotalTokens = 200
	if m := a.Mismatch(b); m != "fleet_budget.total_tokens is 100 here but 200 in the shared budget" {
		t.Errorf("Mismatch = %q", m)
	}
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"key":"stage","window":"1h0m0s","total_tokens":100,"pressure":0.5}` {
		t.Errorf("JSON = %s", data)
	}
	var back FleetBudget
	if err := json.Unmarshal(data, &back); err != nil || back != a {
		t.Errorf("round trip = %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"key":"stage","window":"1h"}`), &back); err == nil {
		t.Error("a budget without limits unmarshalled")
	}
	if got := len(FleetBudget{TotalTokens: 1, InputTokens: 2, OutputTokens: 3, Cost: 4}.Limits()); got != 4 {
		t.Errorf("Limits() has %d entries, want 4", got)
	}
}

func TestEvaluatorFleetHooks(t *testing.T) {
	e := NewEvaluator(AnyOf(), time.Now())
	e.ObserveRef(&Event{Kind: KindMessage})
	w := BudgetPressure{Resource: ResourceCost, Threshold: 0.5, Used: 5, Limit: 10, Scope: ScopeFleet}
	if !e.AddWarning(w) || len(e.WarningsSince(0)) != 1 {
		t.Fatal("AddWarning not recorded")
	}
	x := BudgetExhausted{Resource: ResourceCost, Used: 10, Limit: 10, Scope: ScopeFleet}
	if !e.StopOnEvent(x) {
		t.Fatal("StopOnEvent refused")
	}
	if e.AddWarning(w) || e.StopOnEvent(x) {
		t.Error("a stopped evaluator took a warning or a second stop")
	}
	r := e.Result()
	if r.StoppedAt != 1 || r.Cause != x || len(r.Fired) != 1 || len(r.Warnings) != 1 {
		t.Errorf("result = %+v", r)
	}
	if len(r.Evidence) != 1 || r.Evidence[0] != 1 {
		t.Errorf("evidence = %v, want the event that crossed the shared limit, [1]", r.Evidence)
	}
}

// maxFuzzPolicy bounds FuzzFleetBudgetPolicy's inputs, well above its
// seeds (the longest is under 100 bytes).
const maxFuzzPolicy = 256

func FuzzFleetBudgetPolicy(f *testing.F) {
	for _, s := range []string{
		"fleet_budget: {key: stage, window: 1h, total_tokens: 10}",
		"fleet_budget: {key: 'label:tenant', window: 90s, cost: 2.5, pressure: 0.8}",
		"fleet_budget: {key: 'label:', window: 1h, cost: 1}",
		"fleet_budget: {key: stage, window: 0s, cost: 1}",
		"fleet_budget: {key: stage, window: 1h, cost: .nan}",
		"fleet_budget: {key: stage, window: 1h, input_tokens: 1e30}",
		`{"fleet_budget": {"key": "stage", "window": "1h", "output_tokens": 5}, "max_iterations": 3}`,
		"any: [{fleet_budget: {key: stage, window: 1h, cost: 1}}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Cut, not skipped (a skip is a branch the fuzzer would chase): a
		// fleet_budget needs no more, and minimizing a new long input is
		// quadratic in its length — a 2 KB one stalled the fuzzer for
		// minutes at 0 execs/s.
		data = data[:min(len(data), maxFuzzPolicy)]
		p, err := ParsePolicy(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		b := p.FleetBudget()
		if b == nil {
			return
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("ParsePolicy accepted %q but Validate says %v", data, err)
		}
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var back FleetBudget
		if err := json.Unmarshal(js, &back); err != nil || back != *b {
			t.Fatalf("JSON round trip of %+v: %+v, %v", *b, back, err)
		}
	})
}
