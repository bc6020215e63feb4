package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	superuser = "postgres"
	// port names the socket file (.s.PGSQL.5432); nothing listens on TCP.
	port = "5432"
	// startTimeout bounds a start on a busy machine, under -race.
	startTimeout = time.Minute
)

// cluster is a running PostgreSQL server and its directory, which holds
// the data (data/), the socket and the server's log.
type cluster struct {
	dir    string
	server *os.Process
	exited <-chan error
}

// startCluster creates a cluster in a new temporary directory and starts
// its server. On failure it leaves nothing behind.
func startCluster(bin string) (*cluster, error) {
	owner, err := serverAccount()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(socketParent(), "chatd-pgtest-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	if err := c.start(bin, owner); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func (c *cluster) start(bin string, owner *account) error {
	if owner != nil {
		if err := os.Chown(c.dir, owner.uid, owner.gid); err != nil {
			return err
		}
	}
	if err := c.initdb(bin, owner); err != nil {
		return err
	}
	if err := c.launch(bin, owner); err != nil {
		return err
	}
	err := c.awaitConnections()
	if err == nil {
		err = c.exec(`CREATE ROLE ` + appRole + ` LOGIN`)
	}
	if err != nil {
		c.server.Kill()
		<-c.exited
		return fmt.Errorf("%w\n%s", err, c.logTail())
	}
	return nil
}

func (c *cluster) initdb(bin string, owner *account) error {
	cmd := exec.Command(filepath.Join(bin, "initdb"), "--pgdata", filepath.Join(c.dir, "data"),
		"--username", superuser, "--auth", "trust", "--encoding", "UTF8", "--locale", "C", "--no-sync")
	cmd.Dir = c.dir // the server's account may not enter ours
	cmd.SysProcAttr = sysProcAttr(owner)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return nil
}

// launch starts the server, listening on the socket in c.dir only. The
// settings give up durability for speed, and allow as many connections as
// a test package's parallel stores may hold.
func (c *cluster) launch(bin string, owner *account) error {
	log, err := os.Create(c.logPath())
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(c.dir, "data"),
		"-k", c.dir, "-p", port, "-c", "listen_addresses=", "-c", "max_connections=200",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr(owner)
	started, exited := make(chan error, 1), make(chan error, 1)
	go func() {
		// On Linux the server is told to stop when the thread that started
		// it ends (see sysProcAttr): this goroutine keeps that thread until
		// the server exits.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return err
	}
	c.server, c.exited = cmd.Process, exited
	return nil
}

// awaitConnections waits until the server accepts connections, or fails
// if it exits first or takes longer than startTimeout.
func (c *cluster) awaitConnections() error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := c.exec(`SELECT 1`)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no connection after %v: %w", startTimeout, err)
		}
		select {
		case err := <-c.exited:
			c.exited = closedWith(err)
			return fmt.Errorf("postgres exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// closedWith is an exit already received, for whoever waits for it next.
func closedWith(err error) <-chan error {
	ch := make(chan error, 1)
	ch <- err
	return ch
}

// stop shuts the server down (SIGINT: a fast shutdown, which ends open
// connections) and removes the cluster's directory.
func (c *cluster) stop() error {
	if err := c.server.Signal(os.Interrupt); err != nil {
		c.server.Kill()
	}
	select {
	case <-c.exited:
	case <-time.After(startTimeout):
		c.server.Kill()
		<-c.exited
	}
	return os.RemoveAll(c.dir)
}

// exec runs one statement as the superuser, in the postgres database.
func (c *cluster) exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url(superuser, "postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// url is how pgx reaches database as role, through the cluster's socket.
func (c *cluster) url(role, database string) string {
	query := url.Values{"host": {c.dir}, "port": {port}, "sslmode": {"disable"}}
	u := url.URL{Scheme: "postgres", User: url.User(role), Path: "/" + database, RawQuery: query.Encode()}
	return u.String()
}

// logTail is the end of the server's log, to explain a failed start.
// logPath is the server's log: in the cluster's directory, or where
// CHATD_PG_LOG says, to outlive it.
func (c *cluster) logPath() string {
	if kept := os.Getenv("CHATD_PG_LOG"); kept != "" {
		return kept
	}
	return filepath.Join(c.dir, "postgres.log")
}

func (c *cluster) logTail() string {
	b, _ := os.ReadFile(c.logPath())
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// socketParent is where the cluster's directory goes: the temporary
// directory, unless the socket's path would be too long there (Unix
// allows about 100 bytes).
func socketParent() string {
	if dir := os.TempDir(); len(dir)+len("/chatd-pgtest-0123456789/.s.PGSQL."+port) < 100 {
		return dir
	}
	return "/tmp"
}

// account is who runs initdb and postgres when it is not this process.
type account struct{ uid, gid int }

// serverAccount is the postgres user when this process is root, since
// PostgreSQL refuses to run as root; otherwise nil, for this process's own.
func serverAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root, and there is no postgres user to run it as: %w", err)
	}
	uid, errUID := strconv.Atoi(u.Uid)
	gid, errGID := strconv.Atoi(u.Gid)
	if err := errors.Join(errUID, errGID); err != nil {
		return nil, fmt.Errorf("the postgres user's ids: %w", err)
	}
	return &account{uid: uid, gid: gid}, nil
}
