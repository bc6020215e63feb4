// Command chatd is a self-hosted server for the Band (formerly Thenvoi)
// agent-and-human chat API: one binary, one SQLite file.
//
// Every subcommand sits in a cmd_<name>.go file beside this one. All of them
// work on the same database file while `chatd serve` runs.
package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/chatd/chatd/store"
)

//go:embed schema.sql
var schemaSQL string

//go:embed schema_postgres.sql
var postgresSchemaSQL string

//go:embed web
var webFiles embed.FS

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "chatd: "+namingVariables(describeError(err)))
		var u usageError
		// cobra's own usage mistakes (an unknown command) are plain errors.
		if errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command ") {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// envNames maps flags to the environment variables that set them when the
// flag is not given on the command line; setFromEnv holds those applyEnv
// set, so that an error about the flag can name the variable the value
// came from.
var envNames, setFromEnv = map[string]string{}, map[string]string{}

// namingVariables adds to an error message, after the first flag it names
// whose value came from the environment, which variable that was: the
// person who set CHATD_SYNC reads "--sync" nowhere in their command.
func namingVariables(msg string) string {
	end, env := -1, ""
	for name, e := range setFromEnv {
		if at := flagMentionEnd(msg, "--"+name); at >= 0 && (end < 0 || at < end) {
			end, env = at, e
		}
	}
	if end < 0 {
		return msg
	}
	return msg[:end] + " (set by " + env + ")" + msg[end:]
}

// flagMentionEnd is where the first mention of flag in msg ends (not as the
// start of a longer flag's name), or -1.
func flagMentionEnd(msg, flag string) int {
	for at := 0; ; {
		i := strings.Index(msg[at:], flag)
		if i < 0 {
			return -1
		}
		end := at + i + len(flag)
		if end == len(msg) || !isFlagNameByte(msg[end]) {
			return end
		}
		at = end
	}
}

func isFlagNameByte(b byte) bool { return b == '-' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }

// envFlag registers the environment variable for a flag and mentions it in
// the flag's help.
func envFlag(fs *pflag.FlagSet, name, env string) {
	envNames[name] = env
	f := fs.Lookup(name)
	f.Usage += " (env " + env + ")"
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "chatd",
		Short: "A self-hosted server for the Band agent-and-human chat API",
		Long: `chatd serves the Band (formerly Thenvoi) chat API from one binary and one SQLite
file: rooms where people and AI agents talk, with at-least-once message delivery
to agents and real-time pushes.

Point the Band SDKs at it with
  BAND_REST_URL=http://127.0.0.1:8080
  BAND_WS_URL=ws://127.0.0.1:8080/api/v1/socket/websocket

Start with:  chatd serve
Then:        chatd create-user --handle you --name "Your Name"
             chatd register-agent --name "Helper" --description "Answers questions about the codebase"
Or, to develop an agent against a throwaway server with agents ready:
             chatd dev`,
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd)
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().String("db", "./data/chatd.db", "path of the SQLite database file (serve, dev, migrate and restore create it, and its directory, when missing)")
	envFlag(root.PersistentFlags(), "db", "CHATD_DB")
	root.PersistentFlags().String("database-url", "", "a PostgreSQL database (postgres://…) to use instead of the SQLite file --db names")
	envFlag(root.PersistentFlags(), "database-url", "CHATD_DATABASE_URL")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%v (see %s --help)", err, cmd.CommandPath())}
	})
	root.AddCommand(newServeCmd(), newDevCmd(), newMigrateCmd(), newCreateUserCmd(), newRegisterAgentCmd(), newRotateAgentKeyCmd(),
		newAddWebhookCmd(), newListWebhooksCmd(), newRemoveWebhookCmd(), newResumeWebhookCmd(), newListWebhookDeliveriesCmd(),
		newBackupCmd(), newRestoreCmd(), newRetentionCmd(), newPurgeCmd(), newStatsCmd(), newVacuumCmd(), newMoveCmd(), newTokenCmd(),
		newSetPasswordCmd(), newVersionCmd())
	return root
}

// applyEnv sets every flag not given on the command line from its
// environment variable, if that is set.
func applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		env, ok := envNames[f.Name]
		if !ok || f.Changed || err != nil {
			return
		}
		if v, set := os.LookupEnv(env); set {
			if serr := f.Value.Set(v); serr != nil {
				err = usageError{fmt.Errorf("%s=%q: %v", env, v, serr)}
			}
			setFromEnv[f.Name] = env
		}
	})
	return err
}

// usageError is a mistake in how chatd was invoked; it exits with status 2.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// requireFlags returns a usage error naming the first empty string flag.
func requireFlags(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		if v, _ := cmd.Flags().GetString(n); strings.TrimSpace(v) == "" {
			return usageError{fmt.Errorf("--%s is required (see %s --help)", n, cmd.CommandPath())}
		}
	}
	return nil
}

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d (see %s --help)", cmd.Name(), n, len(args), cmd.CommandPath())}
		}
		return nil
	}
}

// personByHandle finds the person a command names, with the error a
// newcomer can act on when nobody has that handle.
func personByHandle(ctx context.Context, db *store.DB, handle string) (*store.User, error) {
	u, err := db.UserByHandle(ctx, handle)
	if store.ErrorCode(err) == store.CodeNotFound {
		return nil, fmt.Errorf("no person has the handle %q (create them with chatd create-user)", handle)
	}
	return u, err
}

// ownedAgent is the agent a command acts on, named by --agent, with the
// person who owns it: the command acts as that person.
type ownedAgent struct {
	handle string
	owner  *store.User
	agent  *store.Party
}

func (o *ownedAgent) bind(f *pflag.FlagSet) {
	f.StringVar(&o.handle, "agent", "", "the agent's handle, <owner>/<slug>, e.g. alice/helper (required)")
}

// run checks --agent, then runs work on the database with the agent and its
// owner found.
func (o *ownedAgent) run(cmd *cobra.Command, work func(ctx context.Context, db *store.DB) error) error {
	if err := requireFlags(cmd, "agent"); err != nil {
		return err
	}
	o.handle = strings.TrimPrefix(strings.TrimSpace(o.handle), "@")
	ownerHandle, _, isAgent := strings.Cut(o.handle, "/")
	if _, err := store.ParseHandle(o.handle); err != nil || !isAgent {
		return usageError{errors.New("--agent must be an agent's handle, <owner>/<slug>, e.g. alice/helper")}
	}
	return withStore(cmd, func(ctx context.Context, db *store.DB) error {
		var err error
		if o.owner, err = personByHandle(ctx, db, ownerHandle); err != nil {
			return err
		}
		if o.agent, err = db.ResolveHandle(ctx, o.handle); err != nil {
			if store.ErrorCode(err) == store.CodeNotFound {
				return fmt.Errorf("@%s has no agent with the handle %s", o.owner.Handle, o.handle)
			}
			return err
		}
		return work(ctx, db)
	})
}

// actor is the agent's owner, as whom the command acts.
func (o *ownedAgent) actor() store.Actor { return store.UserActor(o.owner) }

// summary names the agent as the commands report it.
func (o *ownedAgent) summary() string { return fmt.Sprintf("%s (@%s)", o.agent.Name, o.agent.Handle) }

// createsDatabase names the commands that create the database when --db
// names no file yet, and create or upgrade its schema. The others refuse: run
// from another directory, they would otherwise start a second, empty
// database at the relative default path and leave the user wondering where
// their data went; and run beside an older server, they would upgrade the
// schema under it.
var createsDatabase = map[string]bool{"serve": true, "migrate": true, "dev": true, "restore": true}

// databasePath returns the absolute path --db names, refusing a missing
// file for commands that do not create one, and says on stderr which file
// the command uses.
func databasePath(cmd *cobra.Command) (string, error) {
	if url, _ := cmd.Flags().GetString("database-url"); url != "" {
		return databaseURL(cmd, url)
	}
	path, _ := cmd.Flags().GetString("db")
	if strings.TrimSpace(path) == "" {
		return "", usageError{errors.New("--db is empty: name the database file")}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if !createsDatabase[cmd.Name()] {
		if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no database at %s: start one with chatd serve (or chatd migrate), "+
				"or name an existing one with --db or CHATD_DB", abs)
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "chatd: database %s\n", abs)
	return abs, nil
}

// databaseURL checks the URL --database-url names and says on stderr,
// without its password, which database the command uses.
func databaseURL(cmd *cobra.Command, url string) (string, error) {
	if !store.IsDatabaseURL(url) {
		return "", usageError{errors.New("--database-url must be a PostgreSQL URL (postgres://user@host/database)")}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "chatd: database %s\n", shownName(url))
	return url, nil
}

// shownName is how a command names the database it printed "chatd:
// database …" for: a file's path, or a PostgreSQL URL without its password.
func shownName(location string) string {
	if store.IsDatabaseURL(location) {
		return store.RedactedURL(location)
	}
	return location
}

// sqliteOnly are the commands that copy or rewrite the SQLite file itself,
// and what does their work on PostgreSQL.
var sqliteOnly = map[string]string{
	"backup":  "on PostgreSQL, back up with pg_dump (docs/operations.md)",
	"restore": "on PostgreSQL, restore with pg_restore or psql (docs/operations.md)",
	"vacuum":  "PostgreSQL reclaims space itself (autovacuum)",
	"dev":     "it makes a throwaway database of its own (unset --database-url and CHATD_DATABASE_URL)",
	"move":    "it copies the SQLite file --db names into the PostgreSQL database --to names (unset --database-url and CHATD_DATABASE_URL)",
}

// withStore runs work on the database --db names, open for as long as work
// runs. Only the commands that set a database up (createsDatabase) create
// or upgrade its schema; the others open it as it is (store.Options.Existing)
// and refuse one at another schema version, or one without chatd's schema,
// leaving it untouched: a CLI command run beside an older chatd server must
// not upgrade the schema under it.
func withStore(cmd *cobra.Command, work func(ctx context.Context, db *store.DB) error) error {
	return withStoreLimits(cmd, store.Limits{}, work)
}

// withStoreLimits is withStore with the quotas a command shares with chatd
// serve (zero: the default), so that it refuses what the server would.
func withStoreLimits(cmd *cobra.Command, limits store.Limits, work func(ctx context.Context, db *store.DB) error) error {
	path, err := databasePath(cmd)
	if err != nil {
		return err
	}
	db, err := openStoreAt(path, store.Options{Existing: !createsDatabase[cmd.Name()], Limits: limits})
	if err != nil {
		return err
	}
	defer db.Close()
	return inputError(work(context.Background(), db))
}

// inputError makes a usage error (exit status 2) of the store's refusal of
// a value as invalid: the values a command hands the store come from its
// command line. The commands check what they can before opening the
// database (checkNewUserFlags, for one); this catches the rest, the same
// for every command that goes through withStore.
func inputError(err error) error {
	var u usageError
	if store.ErrorCode(err) == store.CodeValidation && !errors.As(err, &u) {
		return usageError{err}
	}
	return err
}

// withDatabaseFile runs work on the path --db names without opening the
// database, for the commands that copy the whole file. Ctrl-C cancels
// work's context instead of killing chatd, so that an interrupted copy
// still removes its temporary file.
func withDatabaseFile(cmd *cobra.Command, work func(ctx context.Context, path string) error) error {
	if err := refuseDatabaseURL(cmd); err != nil {
		return err
	}
	path, err := databasePath(cmd)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return work(ctx, path)
}

// refuseDatabaseURL refuses --database-url to the commands that work on
// the SQLite file itself.
func refuseDatabaseURL(cmd *cobra.Command) error {
	if url, _ := cmd.Flags().GetString("database-url"); url != "" {
		return usageError{fmt.Errorf("chatd %s works on a SQLite file; %s", cmd.Name(), sqliteOnly[cmd.Name()])}
	}
	return nil
}

// openStoreAt opens the database at path (from databasePath).
func openStoreAt(path string, opts store.Options) (*store.DB, error) {
	opts.Schema, opts.PostgresSchema = schemaSQL, postgresSchemaSQL
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return store.Open(path, opts)
}

func webFS() fs.FS {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err)
	}
	return sub
}

// describeError renders err on one line. Validation problems name the
// command-line flags they are about.
func describeError(err error) string {
	var e *store.Error
	if errors.As(err, &e) {
		if p, ok := e.Details.(store.Problems); ok && len(p) > 0 && e.Code != store.CodeConflict {
			keys := make([]string, 0, len(p))
			for k := range p {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, 0, len(keys))
			for _, k := range keys {
				parts = append(parts, flagOf(k)+" "+strings.Join(p[k], ", "))
			}
			return strings.Join(parts, "; ")
		}
		return e.Message
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// flagNames are the fields whose flag is not the field's name.
var flagNames = map[string]string{"tags": "tag", "organization": "org"}

// flagOf names the flag a JSON Pointer such as "/agent/api_key" or
// "/agent/tags/2" is about.
func flagOf(pointer string) string {
	segs := strings.Split(pointer, "/")
	for i := len(segs) - 1; i > 0; i-- {
		if _, err := strconv.Atoi(segs[i]); err != nil && segs[i] != "" {
			if f, ok := flagNames[segs[i]]; ok {
				return "--" + f
			}
			return "--" + strings.ReplaceAll(segs[i], "_", "-")
		}
	}
	return "input"
}

// printResult prints v as one JSON object on a line (--json) or text.
func printResult(w io.Writer, asJSON bool, v any, text string) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	_, err := io.WriteString(w, text)
	return err
}

// keyKind says whose key a command minted and where it is used.
type keyKind struct{ name, use string }

var (
	humanKey = keyKind{"Human", "/api/v1/me/* requests"}
	agentKey = keyKind{"Agent", "/api/v1/agent/* requests, or as the SDK's agent API key"}
)

// agentSummary names an agent and its owner as the commands that mint an
// agent's key report it.
func agentSummary(a *store.Agent, owner *store.User) string {
	return fmt.Sprintf("%s (@%s, id %s), owned by @%s", a.Name, a.Handle, a.ID, owner.Handle)
}

// printNewKey prints a key just minted for the party id and handle, after
// summary (a sentence on what was done), or as JSON (--json). chatd keeps
// only the key's hash, so this is the one time anybody sees it.
func printNewKey(cmd *cobra.Command, asJSON bool, kind keyKind, id, handle, key, summary string) error {
	return printResult(cmd.OutOrStdout(), asJSON,
		map[string]string{"id": id, "handle": handle, "api_key": key},
		fmt.Sprintf("%s\n\n%s API key - shown only now, store it somewhere safe:\n\n  %s\n\nUse it as the X-API-Key header on %s.\n",
			summary, kind.name, key, kind.use))
}
