package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newMoveCmd() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "move --to postgres://…",
		Short: "Copy the SQLite database into an empty PostgreSQL database (the server must be stopped)",
		Long: `Copy everything in the SQLite database --db names (people, agents, keys, rooms,
messages, files, the token-signing secret, …) into the empty PostgreSQL
database --to names, then check the copy, so that chatd serve can run on
PostgreSQL (--database-url) with everything it had.

Before copying anything it checks that:
  - no chatd serve is using the SQLite database (stop it first),
  - the SQLite database is at this chatd's schema version (run chatd migrate
    first if it is older),
  - the PostgreSQL database holds no tables (create it with createdb).
If any check fails it changes nothing and exits non-zero.

It creates chatd's schema in the PostgreSQL database, copies every table,
moves the id sequences past the copied rows, and compares each table's row
count and checksum on both sides. All of that is one PostgreSQL transaction:
if anything fails, or the command is interrupted, nothing is left behind and
the move can be run again. The SQLite file is only read, and left as it was.
At the end it prints the rows per table and what to change in the service
file.`,
		Example: `  systemctl stop chatd
  createdb -O chatd chatd
  chatd move --db /var/lib/chatd/chatd.db --to 'postgres://chatd:secret@db.internal/chatd'
  systemctl edit chatd     # drop --db, set Environment=CHATD_DATABASE_URL=…
  systemctl start chatd`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "to"); err != nil {
				return err
			}
			if !store.IsDatabaseURL(to) {
				return usageError{errors.New("--to must be a PostgreSQL URL (postgres://user:password@host/database)")}
			}
			return withDatabaseFile(cmd, func(ctx context.Context, db string) error {
				report, err := store.Move(ctx, db, to, store.Options{Schema: schemaSQL, PostgresSchema: postgresSchemaSQL},
					moveProgress(cmd))
				switch {
				case errors.Is(err, store.ErrServerRunning):
					return fmt.Errorf("a chatd server is using %s; stop it before moving", db)
				case errors.Is(err, context.Canceled):
					return fmt.Errorf("interrupted: %s is left empty; run the move again", store.RedactedURL(to))
				}
				if err != nil {
					return err
				}
				printMove(cmd, db, to, report)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the empty PostgreSQL database to copy into, postgres://user:password@host/database (required)")
	return cmd
}

// moveProgress tells stderr how a long move goes: the rows of a large
// table as they pass and how long it took, and when the checks begin. A
// small database moves in near silence until the summary.
func moveProgress(cmd *cobra.Command) func(store.MoveProgress) {
	checking := false
	began := time.Now()
	verb := map[string][2]string{"copy": {"copying", "copied"}, "verify": {"checking", "checked"}}
	return func(p store.MoveProgress) {
		w := cmd.ErrOrStderr()
		switch {
		case p.Stage == "verify" && !checking:
			checking = true
			fmt.Fprintln(w, "chatd: copied; checking every table")
		case !p.Done:
			fmt.Fprintf(w, "chatd: %s %s: %d rows\n", verb[p.Stage][0], p.Table, p.Rows)
		case p.Rows >= store.MoveProgressRows:
			fmt.Fprintf(w, "chatd: %s %s: %d rows in %s\n", verb[p.Stage][1], p.Table, p.Rows, time.Since(began).Round(100*time.Millisecond))
		}
		if p.Done {
			began = time.Now()
		}
	}
}

// printMove prints what was moved, and what the service file needs next.
func printMove(cmd *cobra.Command, db, to string, r *store.MoveReport) {
	out := cmd.OutOrStdout()
	url := store.RedactedURL(to)
	fmt.Fprintf(out, "moved %s to %s in %s (schema version %d)\n\n", db, url, r.Elapsed.Round(10*time.Millisecond), r.SchemaVersion)
	tables := slices.Clone(r.Tables)
	slices.SortFunc(tables, func(a, b store.MovedTable) int { return cmp.Compare(a.Name, b.Name) })
	width := len("total")
	var total int64
	for _, t := range tables {
		width = max(width, len(t.Name))
		total += t.Rows
	}
	rows := max(len("rows"), len(fmt.Sprint(total)))
	fmt.Fprintf(out, "  %-*s  %*s\n", width, "table", rows, "rows")
	for _, t := range tables {
		fmt.Fprintf(out, "  %-*s  %*d\n", width, t.Name, rows, t.Rows)
	}
	fmt.Fprintf(out, "  %-*s  %*d\n", width, "total", rows, total)
	fmt.Fprintf(out, "\nEvery table's row count and checksum match on both sides.\n")
	if len(r.NotMoved) > 0 {
		fmt.Fprintf(out, "Not moved, as they belong to the SQLite server's process: %s.\n", strings.Join(r.NotMoved, ", "))
	}
	if len(r.PostgresOnly) > 0 {
		fmt.Fprintf(out, "Tables only PostgreSQL has, left as its schema made them: %s.\n", strings.Join(r.PostgresOnly, ", "))
	}
	fmt.Fprintf(out, "%s is left as it was; nothing writes to it once chatd runs on PostgreSQL.\n\n", db)
	fmt.Fprintf(out, "To run chatd on PostgreSQL, change its service file (systemctl edit chatd):\n")
	fmt.Fprintf(out, "  remove  --db %s from ExecStart, and any Environment=CHATD_DB=\n", db)
	fmt.Fprintf(out, "  add     Environment=CHATD_DATABASE_URL=%s\n", url)
	if strings.Contains(url, "xxxxx") {
		fmt.Fprintf(out, "          with the password in place of xxxxx (or put the line in an EnvironmentFile= only chatd reads)\n")
	}
	fmt.Fprintf(out, "then start chatd; every command beside it takes the same --database-url (or CHATD_DATABASE_URL).\n")
}
