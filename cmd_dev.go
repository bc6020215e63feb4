package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

// What chatd dev makes. Its person lives in an organization of its own,
// which is how dev tells the people it made from real ones in a database.
const (
	devOrganization = "chatd dev"
	devHandle       = "dev"
	devRoomTitle    = "Dev room"
	maxDevAgents    = 20
	// devGrace is short: a developer's Ctrl-C should not wait long, and
	// nothing of a development server is worth waiting for.
	devGrace = 5 * time.Second
)

func newDevCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev [--db PATH] [--addr ADDR] [--agents N] [--reset]",
		Short: "Run a server for local agent development, with a person and agents ready",
		Long: `Run a chat server for developing agents on this machine, with everything an
agent needs already there: a person @dev with a new random password, N agents
(@dev/agent-1, @dev/agent-2, ...) and a room "Dev room" with all of them.

It prints a link that opens the web app signed in as @dev, and for each agent
the four variables the Band SDKs read (BAND_REST_URL, BAND_WS_URL,
BAND_AGENT_ID, BAND_API_KEY) as export lines: paste one agent's lines into
the shell that runs it. Every other line it prints is a shell comment.

Without --db the database is a throwaway one in a new temporary directory,
removed when chatd dev stops; ./data/chatd.db is never touched. A database
named with --db is kept: each run reuses its person, agents and room, adds
what is missing, sets a new password and gives the agents new keys (chatd
keeps only their hashes, so the old ones cannot be shown again). It may hold
real people too; dev's own live in an organization of their own, "chatd dev".
A database named only by CHATD_DB is refused if it holds anybody dev did not
make: name such a database with --db.

--reset removes the named database and starts it afresh, but only one that
holds nobody dev did not make; it refuses any other and removes nothing.

SIGINT (Ctrl-C) or SIGTERM stops it cleanly.`,
		Example: `  chatd dev
  chatd dev --agents 3 --addr 127.0.0.1:0
  chatd dev --db ./dev.db --reset`,
		Args: exactArgs(0),
		RunE: runDev,
	}
	f := cmd.Flags()
	f.String("addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	f.Int("agents", 2, fmt.Sprintf("how many agents to make ready, 1 to %d", maxDevAgents))
	f.Bool("reset", false, "start the database named with --db afresh (only one that holds nobody chatd dev did not make)")
	addLogFlags(f)
	for flag, env := range map[string]string{"addr": "CHATD_ADDR", "agents": "CHATD_DEV_AGENTS"} {
		envFlag(f, flag, env)
	}
	return cmd
}

func runDev(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	addr, _ := f.GetString("addr")
	n, _ := f.GetInt("agents")
	reset, _ := f.GetBool("reset")
	if n < 1 || n > maxDevAgents {
		return usageError{fmt.Errorf("--agents must be from 1 to %d, not %d", maxDevAgents, n)}
	}
	logger, err := newLogger(cmd)
	if err != nil {
		return err
	}
	d, err := chooseDevDatabase(cmd, reset)
	if err != nil {
		return err
	}
	defer d.removeThrowaway(cmd.ErrOrStderr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := serveConfig{addr: addr, dbPath: d.path, grace: devGrace,
		prepare: func() error { return d.prepare(ctx, cmd.ErrOrStderr(), reset) }}
	p, err := startProgram(cfg, logger)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: choose another with --addr (port 0 picks a free one)", err)
	}
	if err != nil {
		return err
	}
	defer p.Close()
	s, err := seedDev(ctx, p, n)
	if err != nil {
		return err
	}
	printDev(cmd.OutOrStdout(), p.url, d, s)
	return p.Run(ctx)
}

// devDatabase is the file chatd dev runs on.
type devDatabase struct {
	path string
	// named: --db gave it on the command line (not CHATD_DB alone).
	named bool
	// throwaway is the temporary directory holding a throwaway database,
	// removed on exit; "" for a named one.
	throwaway string
}

// chooseDevDatabase picks the database: the one --db or CHATD_DB names,
// else a throwaway one. The default path of the other commands is never
// used, so that dev cannot wander into ./data/chatd.db.
func chooseDevDatabase(cmd *cobra.Command, reset bool) (*devDatabase, error) {
	if err := refuseDatabaseURL(cmd); err != nil {
		return nil, err
	}
	named := cmd.Flags().Changed("db")
	if env, ok := os.LookupEnv("CHATD_DB"); named || (ok && strings.TrimSpace(env) != "") {
		path, err := databasePath(cmd)
		return &devDatabase{path: path, named: named}, err
	}
	if reset {
		return nil, usageError{errors.New("--reset starts afresh a database named with --db; without one, chatd dev always starts on a new throwaway database")}
	}
	dir, err := os.MkdirTemp("", "chatd-dev-")
	if err != nil {
		return nil, err
	}
	d := &devDatabase{path: filepath.Join(dir, "chatd.db"), throwaway: dir}
	fmt.Fprintf(cmd.ErrOrStderr(), "chatd: database %s (throwaway: removed when chatd dev stops)\n", d.path)
	return d, nil
}

// prepare runs under the server lock, before the database is opened: it
// refuses a database with people dev did not make where it must, and
// removes the file for --reset.
func (d *devDatabase) prepare(ctx context.Context, stderr io.Writer, reset bool) error {
	if d.throwaway != "" {
		return nil
	}
	others, err := store.PeopleOutside(ctx, d.path, devOrganization, 6)
	if err != nil {
		return err
	}
	list := strings.Join(others, ", ")
	if len(others) > 5 {
		list = strings.Join(others[:5], ", ") + ", …"
	}
	switch {
	case len(others) > 0 && reset:
		return fmt.Errorf("%s holds people chatd dev did not make (%s): --reset starts afresh only a database of chatd dev's own, so nothing was removed", d.path, list)
	case len(others) > 0 && !d.named:
		return usageError{fmt.Errorf("CHATD_DB names %s, which holds people chatd dev did not make (%s): name it with --db to add dev's person and agents beside them, or unset CHATD_DB for a throwaway database", d.path, list)}
	case reset:
		for _, f := range []string{d.path, d.path + "-wal", d.path + "-shm"} {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("--reset: %w", err)
			}
		}
		fmt.Fprintf(stderr, "chatd: --reset removed %s; starting it afresh\n", d.path)
	}
	return nil
}

// removeThrowaway removes a throwaway database's directory, and says so.
func (d *devDatabase) removeThrowaway(stderr io.Writer) {
	if d == nil || d.throwaway == "" {
		return
	}
	if err := os.RemoveAll(d.throwaway); err != nil {
		fmt.Fprintf(stderr, "chatd: could not remove the throwaway database: %v\n", err)
		return
	}
	fmt.Fprintf(stderr, "chatd: removed the throwaway database %s\n", d.path)
}

// printDev prints what a developer pastes: the signed-in link and, per
// agent, its export lines. Every other line is a shell comment, so that
// pasting more than one agent's block runs nothing unintended.
func printDev(w io.Writer, url string, d *devDatabase, s *devSetup) {
	where := "the database " + d.path
	if d.throwaway != "" {
		where = "a throwaway database, removed when chatd dev stops"
	}
	fmt.Fprintf(w, "# chatd dev: %s on %s.\n", url, where)
	fmt.Fprintf(w, "# The web app, signed in as @%s for %d hours (then sign in with the password below):\n",
		s.person.Handle, int(store.SessionTTL.Hours()))
	fmt.Fprintf(w, "#   %s/#/session/%s\n", url, s.token)
	fmt.Fprintf(w, "# @%s's password: %s\n", s.person.Handle, s.password)
	fmt.Fprintf(w, "# The room %q holds @%s and the agents below. Paste one agent's lines into the shell that runs it.\n",
		devRoomTitle, s.person.Handle)
	wsURL := "ws" + strings.TrimPrefix(url, "http") + "/api/v1/socket/websocket"
	for _, a := range s.agents {
		fmt.Fprintf(w, "\n# %s (@%s)\n", a.name, a.handle)
		for _, kv := range [][2]string{{"BAND_REST_URL", url}, {"BAND_WS_URL", wsURL}, {"BAND_AGENT_ID", a.id}, {"BAND_API_KEY", a.key}} {
			fmt.Fprintf(w, "export %s=%s\n", kv[0], shellQuote(kv[1]))
		}
		fmt.Fprintf(w, "# Or over MCP (docs/mcp.md): claude mcp add --transport http chatd-%s %s/mcp --header %s\n",
			strings.TrimPrefix(a.handle, s.person.Handle+"/"), url, shellQuote("X-API-Key: "+a.key))
	}
	fmt.Fprintf(w, "\n# Ready. Ctrl-C stops chatd dev.\n")
}

// shellQuote quotes s for a POSIX shell (and zsh) when it holds anything
// beyond characters that stand for themselves: an IPv6 address's brackets
// are a glob pattern, which zsh refuses when nothing matches.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// devSetup is what dev made ready: its person, signed in, its agents with
// new keys, and their room.
type devSetup struct {
	person          *store.User
	password, token string
	agents          []devAgent
}

type devAgent struct{ id, handle, name, key string }

// seedDev makes (or finds again) dev's person, n agents and their room, and
// signs the person in as the web app would.
func seedDev(ctx context.Context, p *program, n int) (*devSetup, error) {
	db := p.db
	u, err := devPerson(ctx, db)
	if err != nil {
		return nil, err
	}
	s := &devSetup{person: u, password: rand.Text()}
	if err := db.SetPassword(ctx, u.ID, s.password); err != nil {
		return nil, err
	}
	_, sess, err := db.SignIn(ctx, u.Handle, s.password)
	if err != nil {
		return nil, err
	}
	if s.token, err = p.srv.SessionToken(sess); err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		a, err := devAgentNumber(ctx, db, u, i)
		if err != nil {
			return nil, err
		}
		s.agents = append(s.agents, a)
	}
	return s, devRoom(ctx, db, u, s.agents)
}

// devPerson finds dev's person, or makes it, refusing a person of that
// handle that dev did not make.
func devPerson(ctx context.Context, db *store.DB) (*store.User, error) {
	u, err := db.UserByHandle(ctx, devHandle)
	if store.ErrorCode(err) == store.CodeNotFound {
		u, _, err = db.CreateUser(ctx, store.NewUser{Handle: devHandle, Name: "Dev", Organization: devOrganization})
		return u, err
	}
	if err != nil {
		return nil, err
	}
	org, err := db.OrganizationName(ctx, u.OrganizationID)
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(org, devOrganization) {
		return nil, fmt.Errorf("the handle @%s belongs to a person chatd dev did not make (of the organization %q); dev needs it for its own", u.Handle, org)
	}
	return u, nil
}

// devAgentNumber registers agent i of dev's person, or gives the one made
// by an earlier run a new key: only a new key can be shown.
func devAgentNumber(ctx context.Context, db *store.DB, owner *store.User, i int) (devAgent, error) {
	slug := fmt.Sprintf("agent-%d", i)
	var a *store.Agent
	var key string
	party, err := db.ResolveHandle(ctx, owner.Handle+"/"+slug)
	switch {
	case store.ErrorCode(err) == store.CodeNotFound:
		a, key, err = db.RegisterAgent(ctx, store.NewAgent{OwnerID: owner.ID, Name: fmt.Sprintf("Agent %d", i), Slug: slug,
			Description: "An agent made by chatd dev"})
	case err == nil:
		a, key, err = db.RotateAgentKey(ctx, owner, party.ID)
	}
	if err != nil {
		return devAgent{}, err
	}
	return devAgent{id: a.ID, handle: a.Handle, name: a.Name, key: key}, nil
}

// devRoom finds dev's room (the oldest room of that title among the
// person's first hundred), or makes it, and adds the agents not in it yet.
func devRoom(ctx context.Context, db *store.DB, owner *store.User, agents []devAgent) error {
	actor := store.UserActor(owner)
	rooms, err := db.ListRooms(ctx, actor, store.RoomFilter{}, store.PageRequest{Limit: 100})
	if err != nil {
		return err
	}
	var room *store.Room
	for _, r := range rooms.Items {
		if r.Title != nil && *r.Title == devRoomTitle {
			room = r
			break
		}
	}
	if room == nil {
		title := devRoomTitle
		if room, err = db.CreateRoom(ctx, actor, store.NewRoom{Title: &title}); err != nil {
			return err
		}
	}
	members, err := db.ListParticipants(ctx, actor, room.ID, store.PartyAgent, store.PageRequest{Limit: 100})
	if err != nil {
		return err
	}
	in := map[string]bool{}
	for _, m := range members.Items {
		in[m.ID] = true
	}
	for _, a := range agents {
		if !in[a.id] {
			if _, err := db.AddParticipant(ctx, actor, room.ID, a.id, "member"); err != nil {
				return err
			}
		}
	}
	return nil
}
