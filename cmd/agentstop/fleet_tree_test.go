package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentstop/agentstop/fleet"
)

// TestRunsTree: runs -tree lists each run under its parent, depth first,
// keeping the listed order within a level; a run whose parent is not
// listed starts a tree; a cycle of parents cannot loop.
func TestRunsTree(t *testing.T) {
	id := func(c byte) string { return strings.Repeat(string(c), 32) }
	now := time.Now()
	rs := []fleet.RunInfo{
		{ID: id('a'), Stage: "planner", Started: now, Updated: now},
		{ID: id('b'), Stage: "lone", Parent: id('f'), Started: now, Updated: now}, // parent elsewhere
		{ID: id('c'), Stage: "researcher", Parent: id('a'), Started: now, Updated: now},
		{ID: id('d'), Stage: "researcher", Parent: id('a'), Started: now, Updated: now},
		{ID: id('e'), Stage: "fetcher", Parent: id('c'), Started: now, Updated: now},
		{ID: id('1'), Stage: "loop", Parent: id('2'), Started: now, Updated: now},
		{ID: id('2'), Stage: "loop", Parent: id('1'), Started: now, Updated: now},
	}
	got := treeOrder(rs)
	var order []string
	for _, r := range got {
		order = append(order, r.ID[:1])
	}
	assert.Equal(t, []string{"a", "c", "e", "d", "b", "1", "2"}, order)

	var b bytes.Buffer
	runsTableOf(&b, got, true)
	lines := strings.Split(b.String(), "\n")
	assert.True(t, strings.HasPrefix(lines[0], "RUN "), lines[0])
	assert.Equal(t, []string{id('a'), "-", "planner"}, strings.Fields(lines[1])[:3], lines[1])
	assert.True(t, strings.HasPrefix(lines[2], "└ "+id('c')), lines[2])
	assert.True(t, strings.HasPrefix(lines[3], "  └ "+id('e')), lines[3])
	assert.True(t, strings.HasPrefix(lines[4], "└ "+id('d')), lines[4])
	assert.True(t, strings.HasPrefix(lines[5], id('b')+" "), "a parent not listed: a root, its parent shown: %s", lines[5])
	assert.Contains(t, lines[5], id('f'))
	assert.Equal(t, "7 live runs", lines[len(lines)-2])

	// Without -tree: the order given, no indentation, the parent column.
	b.Reset()
	runsTable(&b, rs)
	assert.NotContains(t, b.String(), "└")
	assert.Contains(t, b.String(), "PARENT")
}
