package store

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzIsBlank: IsBlank agrees with its definition, written here a second
// way (a rune is visible when it is graphic but neither a mark nor a space
// separator), and blankness of a concatenation is blankness of both parts.
func FuzzIsBlank(f *testing.F) {
	for _, seed := range []string{"", " ", "a", "\u200b", "\u00a0x", "\u0301", "e\u0301", "\ue000", "\u2800", "\x00", "\xff", "\U000e0001", "\u3000"} {
		f.Add(seed, "\u200b")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		visible := false
		for i := 0; i < len(a); {
			r, n := utf8.DecodeRuneInString(a[i:])
			i += n
			if unicode.IsGraphic(r) && !unicode.In(r, unicode.M, unicode.Zs) {
				visible = true
			}
		}
		if IsBlank(a) == visible {
			t.Fatalf("IsBlank(%q) = %v, but by definition visible = %v", a, IsBlank(a), visible)
		}
		if utf8.ValidString(a) && utf8.ValidString(b) && IsBlank(a+b) != (IsBlank(a) && IsBlank(b)) {
			t.Fatalf("IsBlank(%q + %q) = %v, IsBlank of the parts %v, %v", a, b, IsBlank(a+b), IsBlank(a), IsBlank(b))
		}
	})
}

// FuzzCleanTitle: a title CleanTitle accepts is trimmed, valid UTF-8, 1..120
// characters, visible, free of control characters, and accepted unchanged
// when cleaned again; one it refuses stays refused. A title derived from a
// first message is either none or one CleanTitle accepts as it is.
func FuzzCleanTitle(f *testing.F) {
	for _, seed := range []string{
		"  Launch plan  ", strings.Repeat("é", 120), strings.Repeat("x", 121), "   ", "two\nlines", "nul\x00", "\xff\xfe",
		"\u200bzero", "\u0085next line", "a\u2028b", strings.Repeat("\u0301", 120) + "a", "\t tab\tinside", "\r\n\r\nsecond",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		title, msg := CleanTitle(s)
		if title != strings.TrimSpace(s) {
			t.Fatalf("CleanTitle(%q) returned %q, not the trimmed input", s, title)
		}
		again, msgAgain := CleanTitle(title)
		if again != title || (msg == "") != (msgAgain == "") {
			t.Fatalf("CleanTitle is not idempotent on %q: %q, %q then %q, %q", s, title, msg, again, msgAgain)
		}
		if msg == "" {
			checkTitle(t, "CleanTitle("+strconv.Quote(s)+")", title)
		}
		if derived := TitleFromMessage(s); derived != "" {
			checkTitle(t, "TitleFromMessage("+strconv.Quote(s)+")", derived)
			if cleaned, msg := CleanTitle(derived); cleaned != derived || msg != "" {
				t.Fatalf("TitleFromMessage(%q) = %q, which CleanTitle refuses: %s", s, derived, msg)
			}
		}
	})
}

// checkTitle fails when title breaks a rule every stored title keeps.
func checkTitle(t *testing.T, from, title string) {
	t.Helper()
	n := utf8.RuneCountInString(title)
	switch {
	case !utf8.ValidString(title):
		t.Fatalf("%s = %q: not valid UTF-8", from, title)
	case n < 1 || n > maxTitleLen:
		t.Fatalf("%s = %q: %d characters", from, title, n)
	case title != strings.TrimSpace(title):
		t.Fatalf("%s = %q: not trimmed", from, title)
	case IsBlank(title):
		t.Fatalf("%s = %q: nothing visible", from, title)
	case strings.IndexFunc(title, unicode.IsControl) >= 0:
		t.Fatalf("%s = %q: holds a control character", from, title)
	}
}

// FuzzMentions drives mention validation with entries spelled in a small
// language: entries are separated by ',', each a kind letter (m mention, r
// reference, n no kind, z an explicit null, anything else an invalid kind)
// then '#' and a member number or an id, or a handle. Whatever the entries,
// a message that passes checkText has 1..50 entries with an identifier and at
// least one mention; resolution yields distinct, active, non-sender members
// of a valid kind, every entry resolved when nothing is wrong; and the
// content sent references every mention-kind member.
func FuzzMentions(f *testing.F) {
	for _, seed := range [][2]string{
		{"hi @bob", "m@bob"}, {"hi", "mbob,rdee.x"}, {"@ana", "mana"}, {"x", "m#1,m#1"}, {"x", "z@bob"}, {"x", "r@bob"},
		{"x", "qbob"}, {"x", ""}, {"x", ","}, {"@bob.", "m@BOB,m#4"}, {"ana@bob.org", "mbob"}, {"\u200b", "m#9"},
		{"x", "mcy"}, {"@owner/helper? yes", "mowner/helper"}, {"@bob.x", "mbob,mdee.x"},
	} {
		f.Add(seed[0], seed[1])
	}
	members := []*Participant{
		{ID: "p0", Handle: "ana", Status: "active", Type: PartyUser},
		{ID: "p1", Handle: "bob", Status: "active", Type: PartyAgent},
		{ID: "p2", Handle: "cy", Status: "blocked", Type: PartyUser},
		{ID: "p3", Handle: "dee.x", Status: "active", Type: PartyUser},
		{ID: "p4", Handle: "owner/helper", Status: "active", Type: PartyAgent},
	}
	sender := Actor{ID: "p0"}
	f.Fuzz(func(t *testing.T, content, spec string) {
		in := TextInput{Content: content}
		if spec != "" {
			in.Mentions = []MentionInput{}
			for _, entry := range strings.Split(spec, ",") {
				in.Mentions = append(in.Mentions, mentionEntry(entry, members))
			}
		}
		c := checkText(in)
		if c.err() == nil {
			if n := len(in.Mentions); n < 1 || n > maxMentions {
				t.Fatalf("checkText accepted %d mentions", n)
			}
		}
		out := resolveMentions(c, in.Mentions, members, sender)
		seen := map[string]bool{}
		for _, m := range out {
			p := findParticipant(members, m.ID)
			switch {
			case p == nil || p.Status != "active":
				t.Fatalf("resolved %+v, not an active member", m)
			case m.ID == sender.ID:
				t.Fatalf("resolved the sender")
			case seen[m.ID]:
				t.Fatalf("resolved %s twice", m.ID)
			case m.Handle != p.Handle:
				t.Fatalf("resolved %s with handle %q", m.ID, m.Handle)
			}
			seen[m.ID] = true
		}
		if c.err() != nil {
			return
		}
		if len(out) != len(in.Mentions) {
			t.Fatalf("accepted %q but resolved %d of %d entries", spec, len(out), len(in.Mentions))
		}
		for _, m := range out {
			if m.Kind != "mention" && m.Kind != "reference" {
				t.Fatalf("accepted kind %q", m.Kind)
			}
		}
		sent := withMentionsPrepended(content, out)
		if !strings.HasSuffix(sent, content) {
			t.Fatalf("the content sent %q lost the content %q", sent, content)
		}
		for _, m := range out {
			if m.Kind == "mention" && !MentionsHandle(sent, m.Handle) {
				t.Fatalf("the content sent %q does not reference @%s", sent, m.Handle)
			}
		}
	})
}

// mentionEntry reads one entry of FuzzMentions' spec.
func mentionEntry(entry string, members []*Participant) MentionInput {
	var m MentionInput
	if entry == "" {
		return m
	}
	kinds := map[byte]string{'m': "mention", 'r': "reference"}
	switch k := entry[0]; {
	case k == 'z':
		m.KindNull = true
	case k == 'n':
	case kinds[k] != "":
		kind := kinds[k]
		m.Kind = &kind
	default:
		kind := entry[:1]
		m.Kind = &kind
	}
	rest := entry[1:]
	if id, ok := strings.CutPrefix(rest, "#"); ok {
		if len(id) == 1 && id[0] >= '0' && int(id[0]-'0') < len(members) {
			id = members[id[0]-'0'].ID
		}
		m.ID = &id
	} else {
		m.Handle = &rest
	}
	return m
}
