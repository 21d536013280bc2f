// Package causejson is the registry of cause types behind the JSON form of
// causes (contract §2): each registered type has a "$kind" name. Package
// termination registers its built-in causes and writes the causes inside
// its own JSON forms (Result, ShadowVerdict, All) through it; package codec
// publishes it (RegisterCause, MarshalCause, UnmarshalCause, CauseType).
// It knows causes only as values of registered types, so that it imports
// nothing of the module.
package causejson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
)

// ErrUnregistered is returned when a cause's type or "$kind" is not in
// the registry.
var ErrUnregistered = errors.New("cause kind not registered")

type codec struct {
	kind   string
	decode func([]byte) (any, error)
}

var registry = struct {
	sync.RWMutex
	byKind map[string]codec
	byType map[reflect.Type]string
}{byKind: map[string]codec{}, byType: map[reflect.Type]string{}}

// Register adds the type t to the registry under kind; decode reads a
// value of t from its JSON form. It is an error to reuse a kind or
// register a type twice.
func Register(kind string, t reflect.Type, decode func([]byte) (any, error)) error {
	if kind == "" {
		return errors.New("RegisterCause: empty kind")
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byKind[kind]; dup {
		return fmt.Errorf("RegisterCause: kind %q already registered", kind)
	}
	if k, dup := registry.byType[t]; dup {
		return fmt.Errorf("RegisterCause: type %v already registered as %q", t, k)
	}
	registry.byKind[kind] = codec{kind: kind, decode: decode}
	registry.byType[t] = kind
	return nil
}

// Kinds returns the registered "$kind" names, sorted.
func Kinds() []string {
	registry.RLock()
	defer registry.RUnlock()
	kinds := make([]string, 0, len(registry.byKind))
	for k := range registry.byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// Kind returns the registered "$kind" of c's type.
func Kind(c any) (string, error) {
	if c == nil {
		return "", errors.New("nil cause")
	}
	t := reflect.TypeOf(c)
	registry.RLock()
	kind, ok := registry.byType[t]
	registry.RUnlock()
	if !ok {
		return "", fmt.Errorf("%w: %v (call codec.RegisterCause)", ErrUnregistered, t)
	}
	return kind, nil
}

// Marshal returns the JSON form of c: an object whose first member is
// "$kind" followed by the cause's fields as encoding/json writes them.
func Marshal(c any) ([]byte, error) {
	kind, err := Kind(c)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", kind, err)
	}
	body = bytes.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("marshal %s: cause must encode as a JSON object", kind)
	}
	var buf bytes.Buffer
	buf.Grow(len(body) + len(kind) + 12)
	buf.WriteString(`{"$kind":`)
	k, _ := json.Marshal(kind)
	buf.Write(k)
	if inner := bytes.TrimSpace(body[1 : len(body)-1]); len(inner) > 0 {
		buf.WriteByte(',')
		buf.Write(inner)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Unmarshal reads the JSON form written by Marshal. A missing or
// unregistered "$kind" is an error.
func Unmarshal(data []byte) (any, error) {
	var head struct {
		Kind *string `json:"$kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("cause: %w", err)
	}
	if head.Kind == nil {
		return nil, errors.New(`cause: missing "$kind"`)
	}
	registry.RLock()
	c, ok := registry.byKind[*head.Kind]
	registry.RUnlock()
	if !ok {
		return nil, fmt.Errorf("cause: %w: %q", ErrUnregistered, *head.Kind)
	}
	v, err := c.decode(data)
	if err != nil {
		return nil, fmt.Errorf("cause %s: %w", c.kind, err)
	}
	return v, nil
}
