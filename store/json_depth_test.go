package store

import "testing"

func TestJSONDepth(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{
		{`1`, 0},
		{`{}`, 1},
		{`{"a":[1,{"b":[]}]}`, 4},
		{`[[],[[]],[]]`, 3},
		// Brackets and quotes inside strings are text, not structure.
		{`{"a":"[[[{{{"}`, 1},
		{`{"a":"\"[[","b":["\\"]}`, 2},
		{`{"a":"\\\"{"}`, 1},
	} {
		if got := jsonDepth([]byte(c.text)); got != c.want {
			t.Errorf("jsonDepth(%s) = %d, want %d", c.text, got, c.want)
		}
	}
}
