package store

import (
	"strings"
	"testing"
)

func TestIsBlank(t *testing.T) {
	for in, want := range map[string]bool{
		"":                             true,
		"   \t\n\r":                    true,
		"\u200b\u200c\u200d\u2060":     true, // zero-width space, (non-)joiners, word joiner: Cf
		"\ufeff\u200e\u200f\u202e":     true, // BOM and bidi controls: Cf
		"\u00a0\u2003\u3000":           true, // no-break and wide spaces: Zs
		"\u0301\u20dd":                 true, // combining marks with nothing to combine with: M
		"\x00\x07":                     true, // controls: Cc
		"\ue000":                       true, // private use: Co
		"a":                            false,
		"\u200b.\u200b":                false, // punctuation is visible
		"7":                            false,
		"😀":                            false, // So
		"e\u0301":                      false,
		"漢":                            false,
		"\u2800":                       false, // braille blank is a symbol (So) by category
		strings.Repeat(" ", 100) + "x": false,
	} {
		if got := IsBlank(in); got != want {
			t.Errorf("IsBlank(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestCleanTitle(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"  Launch plan  ", "Launch plan", true},
		{strings.Repeat("é", 120), strings.Repeat("é", 120), true},
		{" " + strings.Repeat("x", 120) + " ", strings.Repeat("x", 120), true},
		{strings.Repeat("x", 121), "", false},
		{"   ", "", false},
		{"two\nlines", "", false},
		{"carriage\rreturn", "", false},
		{"nul\x00byte", "", false},
		{"bell\x07", "", false},
	} {
		got, msg := CleanTitle(tc.in)
		if (msg == "") != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("CleanTitle(%q) = %q, %q", tc.in, got, msg)
		}
	}
}

func TestTitleFromMessage(t *testing.T) {
	for in, want := range map[string]string{
		"Plan the launch\nthen ship":    "Plan the launch",
		"\n\n  \u200b\n  second line  ": "second line",
		"tab\tinside":                   "tab inside",
		"zero\u200bwidth":               "zerowidth",
		strings.Repeat("ab", 100):       strings.Repeat("ab", 60),
		"   ":                           "",
		// Found by FuzzCleanTitle: cut first, these marks were the whole title.
		strings.Repeat("\u0301", 120) + "a": "a",
		"\u0301\u00a0\ue000 title":          "title",
	} {
		got := TitleFromMessage(in)
		if got != want {
			t.Errorf("TitleFromMessage(%q) = %q, want %q", in, got, want)
		}
		if got != "" {
			if _, msg := CleanTitle(got); msg != "" {
				t.Errorf("derived title %q is not a valid title: %s", got, msg)
			}
		}
	}
}
