package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentstop/agentstop/internal/label"
)

// checkStage checks the value of a -stage flag against the rules of stage
// names (label.ValidateStage, which middleware.New applies, so that no
// command takes a stage no run can have): the error names the flag, the
// value and the rule.
func checkStage(name string) error {
	err := label.ValidateStage(name)
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "stage name ")
	msg = strings.TrimPrefix(msg, strconv.Quote(name)+" ")
	return fmt.Errorf("-stage %q %s", name, msg)
}

// counted wraps a flag's value and keeps every value it was given, so
// that a command can reject a repeated single-valued flag in its own words
// instead of keeping the last value silently.
type counted struct {
	flag.Value
	values []string
}

func (c *counted) String() string {
	if c == nil || c.Value == nil {
		return ""
	}
	return c.Value.String()
}

func (c *counted) Set(v string) error {
	c.values = append(c.values, v)
	return c.Value.Set(v)
}

// countFlags makes fs's flags names remember their values; the flags
// must be defined. It returns them by name.
func countFlags(fs *flag.FlagSet, names ...string) map[string]*counted {
	m := make(map[string]*counted, len(names))
	for _, name := range names {
		f := fs.Lookup(name)
		c := &counted{Value: f.Value}
		f.Value = c
		m[name] = c
	}
	return m
}

// repeated returns an error naming the flag and its values when it was
// given more than once, with why in the user's terms; nil otherwise.
func (c *counted) repeated(name, why string) error {
	if len(c.values) < 2 {
		return nil
	}
	quoted := make([]string, len(c.values))
	for i, v := range c.values {
		quoted[i] = strconv.Quote(v)
	}
	return fmt.Errorf("-%s given %d times (%s): %s", name, len(c.values), strings.Join(quoted, ", "), why)
}
