package human

import (
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MoneyDigits is how many significant digits [Money] keeps.
const MoneyDigits = 6

// Money writes an amount of money for people: rounded to 6 significant
// digits, in plain decimal notation (no exponent), without trailing zeros:
// 0.0017399999999999998 is "0.00174", 1234567.891 is "1234570", 2 is "2".
// NaN and the infinities are written as strconv writes them; -0 is "0".
func Money(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	if v == 0 {
		return "0"
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', MoneyDigits, 64), 64)
	if err != nil {
		r = v
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// Noun returns the singular noun when n is 1 or -1, its plural otherwise:
// Noun(1, "event") is "event", Noun(0, "event") "events". The plural is
// the English regular one: "es" after s, x, z, ch and sh ("matches"), "ies"
// for a consonant and y ("policies"), "s" otherwise. A noun of several
// words agrees by its last ("tool call" → "tool calls").
func Noun[N ~int | ~int64](n N, singular string) string {
	if n == 1 || n == -1 || singular == "" {
		return singular
	}
	switch {
	case strings.HasSuffix(singular, "s"), strings.HasSuffix(singular, "x"), strings.HasSuffix(singular, "z"),
		strings.HasSuffix(singular, "ch"), strings.HasSuffix(singular, "sh"):
		return singular + "es"
	case strings.HasSuffix(singular, "y") && len(singular) > 1 && !strings.ContainsRune("aeiou", rune(singular[len(singular)-2])):
		return singular[:len(singular)-1] + "ies"
	}
	return singular + "s"
}

// Agree returns one when n is 1 or -1, many otherwise: the verb or
// pronoun that agrees with a count ("1 run has", "2 runs have").
func Agree[N ~int | ~int64](n N, one, many string) string {
	if n == 1 || n == -1 {
		return one
	}
	return many
}

// Count writes n and the noun agreed with it: Count(1, "event") is
// "1 event", Count(3, "event") "3 events".
func Count[N ~int | ~int64](n N, singular string) string {
	return strconv.FormatInt(int64(n), 10) + " " + Noun(n, singular)
}

// DefaultWidth is the width [Width] gives output that is not a terminal,
// or a terminal whose width is not known.
const DefaultWidth = 80

// minWidth is the narrowest width Width returns: narrower, a wrapped
// description would be a column of single words.
const minWidth = 20

// Width is how many columns text written to w may use: for a terminal,
// the COLUMNS environment variable when it holds a width (getenv reads
// it; nil means os.Getenv), DefaultWidth otherwise; for anything else
// (a file, a pipe, a buffer) DefaultWidth.
func Width(w io.Writer, getenv func(string) string) int {
	if !IsTerminal(w) {
		return DefaultWidth
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	if n, err := strconv.Atoi(strings.TrimSpace(getenv("COLUMNS"))); err == nil && n > 0 {
		return max(n, minWidth)
	}
	return DefaultWidth
}

// IsTerminal reports whether w is a terminal (an *os.File that is a
// character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Wrap folds text into lines of at most width characters (runes), breaking
// at spaces; runs of white space become one space. A word longer than
// width gets a line of its own, unbroken. Empty text is no lines.
func Wrap(text string, width int) []string {
	width = max(width, 1)
	var (
		lines []string
		line  strings.Builder
		n     int // runes in line
	)
	for _, word := range strings.Fields(text) {
		wn := utf8.RuneCountInString(word)
		if n > 0 && n+1+wn > width {
			lines = append(lines, line.String())
			line.Reset()
			n = 0
		}
		if n > 0 {
			line.WriteByte(' ')
			n++
		}
		line.WriteString(word)
		n += wn
	}
	if n > 0 {
		lines = append(lines, line.String())
	}
	return lines
}

// durationValue is a time.Duration flag that refuses a bad value with the
// form it wants.
type durationValue time.Duration

func (d *durationValue) String() string { return (*time.Duration)(d).String() }

func (d *durationValue) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

// ErrDuration is wrapped by the error of [ParseDuration] and of a
// [DurationVar] flag's bad value.
var ErrDuration = errors.New("want a duration such as 30m, 90s or 1h30m")

// ParseDuration is time.ParseDuration with an error that says which form
// is wanted (wrapping [ErrDuration]): "want a duration such as 30m, 90s or
// 1h30m", and, for a number without a unit ("5"), which units it may
// take.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	v, err := time.ParseDuration(s)
	if err == nil {
		return v, nil
	}
	if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
		return 0, &durationError{"; a number needs a unit: " + s + "s, " + s + "m or " + s + "h"}
	}
	return 0, &durationError{""}
}

type durationError struct{ hint string }

func (e *durationError) Error() string { return ErrDuration.Error() + e.hint }
func (e *durationError) Unwrap() error { return ErrDuration }

// DurationVar defines a duration flag on fs, like fs.DurationVar, whose bad
// value is an error saying that a duration such as 30m is wanted (see
// [ParseDuration]) rather than "parse error". Its -h line names its value
// "duration", as fs.DurationVar's does, and ends the usage with "(a
// duration such as 30m)".
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage+" (a `duration` such as 30m)")
}

// Duration is DurationVar for a new variable, which it returns.
func Duration(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	DurationVar(fs, p, name, value, usage)
	return p
}
