package store

import "testing"

func TestMentionsHandle(t *testing.T) {
	for _, tc := range []struct {
		content, handle string
		want            bool
	}{
		{"@alice hi", "alice", true},
		{"hi @ALICE", "alice", true},
		{"hi @alice.", "alice", true},
		{"hi @alice, and you", "alice", true},
		{"@alice/helper do it", "alice", false},
		{"@alice/helper do it", "alice/helper", true},
		{"@alice.b here", "alice", false},
		{"@alicex", "alice", false},
		{"mail alice@example.com", "example.com", false},
		{"@bob @alice", "alice", true},
		{"no mention", "alice", false},
		{"@alicex then @alice", "alice", true},
	} {
		if got := MentionsHandle(tc.content, tc.handle); got != tc.want {
			t.Errorf("MentionsHandle(%q, %q) = %v, want %v", tc.content, tc.handle, got, tc.want)
		}
	}
}
