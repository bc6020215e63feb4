package e2e

import (
	"strings"
	"testing"
)

// A PostgreSQL URL's passwords stay out of what chatd prints, wherever the
// URL carries them: in its user part, or in its query as libpq reads them.
// The database is unreachable, so each command fails and says so.
func TestDatabaseURLPasswordsStayUnprinted(t *testing.T) {
	for _, url := range []string{
		"postgres://chatd:topsecret@127.0.0.1:1/chatd?sslmode=disable",
		"postgres://chatd@127.0.0.1:1/chatd?sslmode=disable&password=topsecret",
		"postgresql://chatd@127.0.0.1:1/chatd?password=topsecret&sslpassword=topsecret",
	} {
		for _, args := range [][]string{{"stats"}, {"token", "--user", "alice"}, {"migrate"}} {
			r := runChatd(t, []string{"CHATD_DATABASE_URL=" + url}, args...)
			if r.code == 0 {
				t.Fatalf("chatd %s on an unreachable database succeeded: %s", args[0], r.stdout)
			}
			if strings.Contains(r.stdout+r.stderr, "topsecret") {
				t.Errorf("chatd %s with %s printed a password:\n%s%s", args[0], url, r.stdout, r.stderr)
			}
		}
	}
}
