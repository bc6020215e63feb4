package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A value the command line gives that is refused is a mistake in the
// command line: exit status 2, one line naming the flag, and nothing
// changed. What needs no database is refused before the database is
// opened, so the refusal is the same where there is no database at all.
func TestBadFlagValuesExitTwoAndChangeNothing(t *testing.T) {
	dir := t.TempDir()
	db, _ := newDatabaseWithAlice(t)
	registerAgent(t, db, "--owner", "alice", "--name", "Helper", "--description", "Answers questions")
	missing := filepath.Join(dir, "none", "chatd.db")
	for _, tc := range []struct {
		args []string
		want string
		// afterOpening: only the store checks it, once the database is
		// open (register-agent checks its flags in the store).
		afterOpening bool
	}{
		{args: []string{"create-user", "--handle", "a", "--name", "A"}, want: "--handle must be 2 to 39 characters long"},
		{args: []string{"create-user", "--handle", "bad handle", "--name", "A"}, want: "--handle may contain only"},
		{args: []string{"create-user", "--handle", "bob", "--name", "Bob", "--email", "notanemail"}, want: "--email is not a valid email address"},
		{args: []string{"create-user", "--handle", "bob", "--name", "Bob", "--api-key", "garbage"}, want: "--api-key must start with band_u_"},
		{args: []string{"create-user", "--handle", "bob", "--name", "Bob", "--api-key", "band_a_abcdefghijklmnopqrstuvwxyz"}, want: "--api-key must start with band_u_"},
		{args: []string{"create-user", "--handle", "admin", "--name", "Bob"}, want: "--handle is reserved", afterOpening: true},
		{args: []string{"create-user", "--handle", "bob", "--name", "Bob", "--email", "bob@x.invalid"}, want: "--email must be a deliverable address", afterOpening: true},
		{args: []string{"register-agent", "--owner", "alice", "--name", "Hi", "--description", "Says hello"}, want: "--name must be at least 3 characters long", afterOpening: true},
		{args: []string{"register-agent", "--owner", "alice", "--name", "Helper Two", "--description", "Helps too", "--slug", "Bad Slug"}, want: "--slug may contain only", afterOpening: true},
		{args: []string{"add-webhook", "--agent", "alice/helper", "--url", "ftp://x"}, want: "--url must be an http:// or https:// URL"},
		{args: []string{"add-webhook", "--agent", "alice/helper", "--url", "http://10.0.0.7/hook", "--webhook-deny", "10.0.0.0/8"}, want: "--url leads to 10.0.0.7"},
		{args: []string{"retention", "--text-days", "0"}, want: "--text-days must be a number of days"},
		{args: []string{"token", "--user", "alice", "--ttl", "0"}, want: "--ttl must be between 1s"},
		{args: []string{"token", "--user", "alice", "--ttl", "1ms"}, want: "--ttl must be between 1s"},
		{args: []string{"token", "--user", "alice", "--ttl", "999ms"}, want: "--ttl must be between 1s"},
		{args: []string{"token", "--user", "alice", "--ttl", "721h"}, want: "--ttl must be between 1s"},
	} {
		before := dirDigests(t, filepath.Dir(db))
		r := runChatd(t, nil, append(tc.args, "--db", db)...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr %q", tc.args, r.code, r.stderr)
			continue
		}
		r.failsWithOneLine(t, tc.want)
		if after := dirDigests(t, filepath.Dir(db)); !reflect.DeepEqual(after, before) {
			t.Errorf("%v changed the database", tc.args)
		}
		if tc.afterOpening {
			continue
		}
		if strings.Contains(r.stderr, "chatd: database ") {
			t.Errorf("%v opened the database before refusing its flags: %q", tc.args, r.stderr)
		}
		r = runChatd(t, nil, append(tc.args, "--db", missing)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v without a database: exit %d, %q", tc.args, r.code, r.stderr)
		}
	}

	// The shortest --ttl there is makes a token that is not yet expired.
	runChatd(t, nil, "token", "--db", db, "--user", "alice", "--ttl", "1s").ok(t)
}

// register-agent takes the quotas chatd serve does, from the same flags
// and variables, so that it refuses what the server beside it would and
// allows what it allows.
func TestRegisterAgentTakesTheServersQuotas(t *testing.T) {
	db, _ := newDatabaseWithAlice(t)
	register := func(env []string, args ...string) commandResult {
		t.Helper()
		return runChatd(t, env, append([]string{"register-agent", "--db", db, "--owner", "alice", "--description", "Counts"}, args...)...)
	}
	register([]string{"CHATD_MAX_AGENTS_PER_USER=1"}, "--name", "First").ok(t)
	before := dirDigests(t, filepath.Dir(db))
	register([]string{"CHATD_MAX_AGENTS_PER_USER=1"}, "--name", "Second").failsWithOneLine(t, "limit reached: at most 1 agents")
	register(nil, "--name", "Second", "--max-agents-per-user", "1").failsWithOneLine(t, "limit reached: at most 1 agents")
	if after := dirDigests(t, filepath.Dir(db)); !reflect.DeepEqual(after, before) {
		t.Fatal("a refused register-agent changed the database")
	}
	var tags []string
	for i := range 25 {
		tags = append(tags, "--tag", fmt.Sprintf("t%d", i))
	}
	register(nil, append([]string{"--name", "Tagged"}, tags...)...).failsWithOneLine(t, "at most 20 agent tags")
	register([]string{"CHATD_MAX_TAGS_PER_AGENT=25"}, append([]string{"--name", "Tagged"}, tags...)...).ok(t)
}

// The commands that read a password read it once the database and the
// person are found: a wrong handle or a missing database is said at once,
// not after the password was typed (here: with standard input left open
// and empty, the command still ends).
func TestPasswordIsAskedForLast(t *testing.T) {
	db, _ := newDatabaseWithAlice(t)
	missing := filepath.Join(t.TempDir(), "none", "chatd.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"set-password", "--db", db, "--user", "nobody"}, `no person has the handle "nobody"`},
		{[]string{"set-password", "--db", missing, "--user", "alice"}, "no database at"},
		{[]string{"create-user", "--db", missing, "--handle", "bob", "--name", "Bob", "--password-stdin"}, "no database at"},
	} {
		stdin, held, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := chatdCommand(nil, tc.args...)
		cmd.Stdin = stdin
		var errb strings.Builder
		cmd.Stderr = &errb
		done := start(t, cmd)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("chatd %s waits for a password before saying %q", strings.Join(tc.args, " "), tc.want)
		}
		held.Close()
		stdin.Close()
		if !strings.Contains(errb.String(), tc.want) {
			t.Errorf("chatd %s: stderr %q, want %q", strings.Join(tc.args, " "), errb.String(), tc.want)
		}
	}
}
