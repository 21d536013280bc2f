package human

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestMoney(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want string
	}{
		{0.0017399999999999998, "0.00174"}, // the example: 0.00058 * 3
		{0.1 + 0.2, "0.3"},
		{2, "2"},
		{2.085, "2.085"},
		{1.234567891, "1.23457"},
		{1234567.891, "1234570"},
		{123456.4, "123456"},
		{0.0000012345678, "0.00000123457"},
		{-0.5, "-0.5"},
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{math.Inf(1), "+Inf"},
	} {
		if got := Money(tt.in); got != tt.want {
			t.Errorf("Money(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := Money(math.NaN()); got != "NaN" {
		t.Errorf("Money(NaN) = %q", got)
	}
}

func TestCount(t *testing.T) {
	for _, tt := range []struct {
		n    int
		noun string
		want string
	}{
		{1, "event", "1 event"},
		{0, "event", "0 events"},
		{2, "event", "2 events"},
		{1, "tool call", "1 tool call"},
		{3, "tool call", "3 tool calls"},
		{2, "policy", "2 policies"},
		{2, "day", "2 days"},
		{2, "match", "2 matches"},
		{2, "bus", "2 buses"},
		{-1, "run", "-1 run"},
	} {
		if got := Count(tt.n, tt.noun); got != tt.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tt.n, tt.noun, got, tt.want)
		}
	}
	if got := Count(int64(1), "token"); got != "1 token" {
		t.Errorf("Count(int64(1)) = %q", got)
	}
	if got := Noun(5, "run"); got != "runs" {
		t.Errorf("Noun(5, run) = %q", got)
	}
}

func TestWrap(t *testing.T) {
	text := "a loop that repeats  the same search,\nstopped by stall detection after three repeats"
	lines := Wrap(text, 20)
	want := []string{"a loop that repeats", "the same search,", "stopped by stall", "detection after", "three repeats"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("Wrap = %q, want %q", lines, want)
	}
	for _, l := range Wrap(strings.Repeat("word ", 200), 37) {
		if len(l) > 37 {
			t.Errorf("line %q is longer than 37", l)
		}
	}
	if got := Wrap("short supercalifragilistic word", 8); strings.Join(got, "|") != "short|supercalifragilistic|word" {
		t.Errorf("a long word: %q", got)
	}
	if got := Wrap("  ", 10); len(got) != 0 {
		t.Errorf("blank text: %q", got)
	}
	if got := Wrap("héllo wörld", 5); strings.Join(got, "|") != "héllo|wörld" {
		t.Errorf("runes, not bytes: %q", got)
	}
}

func TestWidth(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
	if got := Width(&bytes.Buffer{}, env("200")); got != DefaultWidth {
		t.Errorf("a buffer: %d, want %d whatever COLUMNS says", got, DefaultWidth)
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a file is a terminal")
	}
	if got := Width(f, env("200")); got != DefaultWidth {
		t.Errorf("a file: %d, want %d", got, DefaultWidth)
	}
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		// No terminal (CI): the terminal cases cannot be made here; the
		// COLUMNS parsing is checked through widthOf below.
		tty = nil
	}
	if tty != nil {
		defer tty.Close()
		for cols, want := range map[string]int{"132": 132, "": DefaultWidth, "x": DefaultWidth, "5": minWidth} {
			if got := Width(tty, env(cols)); got != want {
				t.Errorf("a terminal with COLUMNS=%q: %d, want %d", cols, got, want)
			}
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    time.Duration
		errText string
	}{
		{"30m", 30 * time.Minute, ""},
		{" 1h30m ", 90 * time.Minute, ""},
		{"0", 0, ""},
		{"5", 0, "want a duration such as 30m, 90s or 1h30m; a number needs a unit: 5s, 5m or 5h"},
		{"2.5", 0, "a number needs a unit: 2.5s, 2.5m or 2.5h"},
		{"soon", 0, "want a duration such as 30m, 90s or 1h30m"},
		{"", 0, "want a duration such as 30m"},
	} {
		got, err := ParseDuration(tt.in)
		if tt.errText == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.errText) || !errors.Is(err, ErrDuration) {
			t.Errorf("ParseDuration(%q): error %v, want one containing %q (and wrapping ErrDuration)", tt.in, err, tt.errText)
		}
		if err != nil && strings.Contains(err.Error(), "parse error") {
			t.Errorf("ParseDuration(%q): %v says parse error", tt.in, err)
		}
	}
}

func TestDurationVar(t *testing.T) {
	fs := flag.NewFlagSet("block", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	expire := Duration(fs, "expire", 0, "remove the block after this long")
	wait := Duration(fs, "wait", 2*time.Second, "how long to wait")
	if *wait != 2*time.Second {
		t.Fatalf("default = %v", *wait)
	}
	err := fs.Parse([]string{"-expire", "5"})
	if err == nil || !strings.Contains(err.Error(), `invalid value "5" for flag -expire: want a duration such as 30m`) {
		t.Fatalf("-expire 5: %v", err)
	}
	if err := fs.Parse([]string{"-expire", "90s", "-wait", "1m"}); err != nil || *expire != 90*time.Second || *wait != time.Minute {
		t.Fatalf("-expire 90s -wait 1m: %v, %v, %v", err, *expire, *wait)
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, want := range []string{"-expire duration", "remove the block after this long (a duration such as 30m)\n", "-wait duration", "(default 2s)"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h does not show %q:\n%s", want, help.String())
		}
	}
	if strings.Contains(help.String(), "(default 0s)") {
		t.Errorf("a zero default is shown:\n%s", help.String())
	}
}

func TestAgree(t *testing.T) {
	for n, want := range map[int]string{0: "have", 1: "has", 2: "have", -1: "has"} {
		if got := Agree(n, "has", "have"); got != want {
			t.Errorf("Agree(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzWrap: no line is longer than the width unless it is one word, no
// line is blank or has blanks at its ends, and the words come out as they
// went in.
func FuzzWrap(f *testing.F) {
	f.Add("a loop that repeats the same search", 10)
	f.Add("  ünïcode  wörds\tand\nnewlines ", 3)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, text string, width int) {
		width = width % 200
		lines := Wrap(text, width)
		for _, l := range lines {
			if l == "" || strings.TrimSpace(l) != l {
				t.Fatalf("line %q", l)
			}
			if utf8.RuneCountInString(l) > max(width, 1) && strings.ContainsAny(l, " ") {
				t.Fatalf("line %q longer than %d", l, width)
			}
		}
		if got, want := strings.Fields(strings.Join(lines, " ")), strings.Fields(text); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("words %q, want %q", got, want)
		}
	})
}

// FuzzParseDuration: a value is what time.ParseDuration makes of it, or an
// error wrapping ErrDuration; never "parse error", never a panic.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30m", "5", "-1s", "1h30m", "soon", "", "2.5", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseDuration(s)
		want, werr := time.ParseDuration(strings.TrimSpace(s))
		if (err == nil) != (werr == nil) || got != want {
			t.Fatalf("ParseDuration(%q) = %v, %v; time.ParseDuration: %v, %v", s, got, err, want, werr)
		}
		if err != nil && (!errors.Is(err, ErrDuration) || strings.Contains(err.Error(), "parse error")) {
			t.Fatalf("ParseDuration(%q): %v", s, err)
		}
	})
}
