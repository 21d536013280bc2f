package telemetry

import (
	"encoding/json"
	"slices"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/termination"
)

// causeKeyPrefix starts the attribute key of every cause field on the
// termination event: "termination.<field>".
const causeKeyPrefix attribute.Key = "termination."

// Attribute keys of the termination event's cause fields.
const (
	keyCondition = causeKeyPrefix + "condition"
	keyDetail    = causeKeyPrefix + "detail"
	keyTarget    = causeKeyPrefix + "target"
	keySource    = causeKeyPrefix + "source"
	keyLimit     = causeKeyPrefix + "limit"
	keyCount     = causeKeyPrefix + "count"
	keyResource  = causeKeyPrefix + "resource"
	keyThreshold = causeKeyPrefix + "threshold"
	keyUsed      = causeKeyPrefix + "used"
	keySignal    = causeKeyPrefix + "signal"
	keyRepeats   = causeKeyPrefix + "repeats"
	keyElapsed   = causeKeyPrefix + "elapsed"
	keyReason    = causeKeyPrefix + "reason"
	keyError     = causeKeyPrefix + "error"
	keyProps     = causeKeyPrefix + "properties"
	keyCauses    = causeKeyPrefix + "causes"
	keyTool      = causeKeyPrefix + "tool"
	keyScope     = causeKeyPrefix + "scope"
	keyPeriod    = causeKeyPrefix + "period"
	keyIdle      = causeKeyPrefix + "idle"
)

// causeAttributes turns a cause's JSON fields into "termination.<field>"
// attributes. Built-in causes keep their Go types, so a field always has the
// same attribute type (budget amounts are always doubles, even when whole);
// Timeout's durations are Go duration strings as in the JSON form; nested
// values (Custom properties, All's causes) are JSON text. Optional fields
// (a per-tool limit's tool, a fleet budget's or a tree limit's scope, an
// idle limit's idle, a cycle's period, a skip's detail) are there when the
// JSON form has them.
func causeAttributes(c termination.Cause) []attribute.KeyValue {
	switch c := c.(type) {
	case nil:
		return nil
	case termination.Completed:
		return []attribute.KeyValue{keyCondition.String(c.Condition), keyDetail.String(c.Detail)}
	case termination.NaturalCompletion:
		return nil
	case termination.HandoffRequested:
		return []attribute.KeyValue{keySource.String(c.Source), keyTarget.String(c.Target)}
	case termination.MaxIterationsReached:
		return withScope([]attribute.KeyValue{keyCount.Int(c.Count), keyLimit.Int(c.Limit)}, c.Scope)
	case termination.MaxToolCallsReached:
		kv := []attribute.KeyValue{keyCount.Int(c.Count), keyLimit.Int(c.Limit)}
		if c.Tool != "" {
			kv = append(kv, keyTool.String(c.Tool))
		}
		return withScope(kv, c.Scope)
	case termination.BudgetPressure:
		return withScope([]attribute.KeyValue{keyLimit.Float64(c.Limit), keyResource.String(string(c.Resource)),
			keyThreshold.Float64(c.Threshold), keyUsed.Float64(c.Used)}, c.Scope)
	case termination.BudgetExhausted:
		return withScope([]attribute.KeyValue{keyLimit.Float64(c.Limit), keyResource.String(string(c.Resource)), keyUsed.Float64(c.Used)}, c.Scope)
	case termination.StallDetected:
		kv := []attribute.KeyValue{keyRepeats.Int(c.Repeats), keySignal.String(string(c.Signal))}
		if c.Period != 0 {
			kv = append(kv, keyPeriod.Int(c.Period))
		}
		return kv
	case termination.Timeout:
		kv := []attribute.KeyValue{keyElapsed.String(c.Elapsed.String()), keyLimit.String(c.Limit.String())}
		if c.Idle {
			kv = append(kv, keyIdle.Bool(true))
		}
		return withScope(kv, c.Scope)
	case termination.Cancelled:
		return []attribute.KeyValue{keyDetail.String(c.Detail), keyReason.String(string(c.Reason))}
	case termination.Failed:
		return []attribute.KeyValue{keyError.String(c.Err), keyReason.String(string(c.Reason))}
	case termination.Skipped:
		if c.Detail != "" {
			return []attribute.KeyValue{keyDetail.String(c.Detail), keyReason.String(string(c.Reason))}
		}
		return []attribute.KeyValue{keyReason.String(string(c.Reason))}
	case termination.Custom:
		props := "null"
		if b, err := json.Marshal(c.Properties); err == nil {
			props = string(b)
		}
		return []attribute.KeyValue{keyProps.String(props), keyReason.String(c.Reason)}
	case termination.All:
		b, err := codec.MarshalCause(c)
		if err != nil {
			return nil
		}
		var fields struct {
			Causes json.RawMessage `json:"causes"`
		}
		if json.Unmarshal(b, &fields) != nil {
			return nil
		}
		return []attribute.KeyValue{keyCauses.String(string(fields.Causes))}
	}
	return jsonCauseAttributes(c)
}

// jsonCauseAttributes flattens a user-defined cause's JSON fields into
// "termination.<field>" attributes; nested values are kept as JSON text.
func jsonCauseAttributes(c termination.Cause) []attribute.KeyValue {
	b, err := codec.MarshalCause(c)
	if err != nil {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return nil
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != "$kind" { // the cause's registered type (codec.CauseType), not one of its fields
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]attribute.KeyValue, 0, len(keys))
	for _, k := range keys {
		key := attribute.Key("termination." + k)
		raw := fields[k]
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		switch v := v.(type) {
		case string:
			out = append(out, key.String(v))
		case float64:
			if v == float64(int64(v)) {
				out = append(out, key.Int64(int64(v)))
			} else {
				out = append(out, key.Float64(v))
			}
		case bool:
			out = append(out, key.Bool(v))
		case nil:
		default:
			out = append(out, key.String(string(raw)))
		}
	}
	return out
}

// withScope adds a limit's scope (fleet, tree) to kv when it has one.
func withScope(kv []attribute.KeyValue, scope string) []attribute.KeyValue {
	if scope != "" {
		kv = append(kv, keyScope.String(scope))
	}
	return kv
}
