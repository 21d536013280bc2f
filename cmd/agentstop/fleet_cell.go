package main

import (
	"strconv"
	"strings"
	"unicode"
)

// cell is s as one table cell: a value holding control characters (a tab
// or newline would break the row) is shown with Go escapes, e.g. `a\nb`.
func cell(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
