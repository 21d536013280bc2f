// Package causejson is the JSON form of causes (contract §2): each cause
// type has a "$kind" name. A [Table] holds a fixed set of types (the
// contract's built-in causes: termination's own JSON forms — Result,
// ShadowVerdict, All — and package codec each build a Table of them, and
// codec's tests hold the two lists together); the
// registry holds the types a program adds at run time (codec.RegisterCause).
// A Table looks in its own types first, then in the registry. The package
// knows causes only as values, so that it imports nothing of the module.
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

// ErrUnregistered is returned when a cause's type or "$kind" is neither in
// the table nor in the registry.
var ErrUnregistered = errors.New("cause kind not registered")

type entry struct {
	kind   string
	decode func([]byte) (any, error)
}

// registry is the program's own cause types, added by Register.
var registry = struct {
	sync.RWMutex
	byKind map[string]entry
	byType map[reflect.Type]string
}{byKind: map[string]entry{}, byType: map[reflect.Type]string{}}

// Table is a fixed set of cause types, each under its Go type name.
type Table struct {
	byKind map[string]reflect.Type
	byType map[reflect.Type]string
}

// NewTable returns the table of the types of values, each under its type's
// name. Values must be of distinct, named, non-pointer types.
func NewTable[C any](values []C) Table {
	t := Table{byKind: make(map[string]reflect.Type, len(values)), byType: make(map[reflect.Type]string, len(values))}
	for _, v := range values {
		typ := reflect.TypeOf(v)
		t.byKind[typ.Name()] = typ
		t.byType[typ] = typ.Name()
	}
	return t
}

// Register adds the type typ to the registry under kind; decode reads a
// value of typ from its JSON form. It is an error to reuse a kind or a
// type, of the table or of the registry.
func (t Table) Register(kind string, typ reflect.Type, decode func([]byte) (any, error)) error {
	if kind == "" {
		return errors.New("RegisterCause: empty kind")
	}
	if _, dup := t.byKind[kind]; dup {
		return fmt.Errorf("RegisterCause: kind %q already registered", kind)
	}
	if k, dup := t.byType[typ]; dup {
		return fmt.Errorf("RegisterCause: type %v already registered as %q", typ, k)
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byKind[kind]; dup {
		return fmt.Errorf("RegisterCause: kind %q already registered", kind)
	}
	if k, dup := registry.byType[typ]; dup {
		return fmt.Errorf("RegisterCause: type %v already registered as %q", typ, k)
	}
	registry.byKind[kind] = entry{kind: kind, decode: decode}
	registry.byType[typ] = kind
	return nil
}

// Kinds returns the "$kind" names of the table and the registry, sorted.
func (t Table) Kinds() []string {
	registry.RLock()
	defer registry.RUnlock()
	kinds := make([]string, 0, len(t.byKind)+len(registry.byKind))
	for k := range t.byKind {
		kinds = append(kinds, k)
	}
	for k := range registry.byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// Kind returns the "$kind" of c's type.
func (t Table) Kind(c any) (string, error) {
	if c == nil {
		return "", errors.New("nil cause")
	}
	typ := reflect.TypeOf(c)
	if kind, ok := t.byType[typ]; ok {
		return kind, nil
	}
	registry.RLock()
	kind, ok := registry.byType[typ]
	registry.RUnlock()
	if !ok {
		return "", fmt.Errorf("%w: %v (call codec.RegisterCause)", ErrUnregistered, typ)
	}
	return kind, nil
}

// Marshal returns the JSON form of c: an object whose first member is
// "$kind" followed by the cause's fields as encoding/json writes them.
func (t Table) Marshal(c any) ([]byte, error) {
	kind, err := t.Kind(c)
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

// Unmarshal reads the JSON form written by Marshal. A missing or unknown
// "$kind" is an error.
func (t Table) Unmarshal(data []byte) (any, error) {
	var head struct {
		Kind *string `json:"$kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("cause: %w", err)
	}
	if head.Kind == nil {
		return nil, errors.New(`cause: missing "$kind"`)
	}
	kind := *head.Kind
	if typ, ok := t.byKind[kind]; ok {
		p := reflect.New(typ)
		if err := json.Unmarshal(data, p.Interface()); err != nil {
			return nil, fmt.Errorf("cause %s: %w", kind, err)
		}
		return p.Elem().Interface(), nil
	}
	registry.RLock()
	e, ok := registry.byKind[kind]
	registry.RUnlock()
	if !ok {
		return nil, fmt.Errorf("cause: %w: %q", ErrUnregistered, kind)
	}
	v, err := e.decode(data)
	if err != nil {
		return nil, fmt.Errorf("cause %s: %w", kind, err)
	}
	return v, nil
}
