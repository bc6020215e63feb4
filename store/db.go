package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// busyTimeout is how long a connection waits for a lock held by another
// connection (another chatd process, such as the CLI next to a running server).
const busyTimeout = 5 * time.Second

// Sync is the durability level of a commit.
type Sync string

const (
	// SyncFull fsyncs the WAL on every commit: an acknowledged write survives
	// a crash of the process and a loss of power.
	SyncFull Sync = "full"
	// SyncNormal fsyncs only at checkpoints: an acknowledged write survives a
	// crash of the process, but the last commits may be lost on power loss.
	SyncNormal Sync = "normal"
)

// Options configure Open. The zero value of every field but Schema is usable.
type Options struct {
	// Schema is the text of schema.sql: the full current schema, ending with
	// "PRAGMA user_version = N;".
	Schema string
	// PostgresSchema is the text of schema_postgres.sql, the same schema for
	// PostgreSQL; only a database URL needs it.
	PostgresSchema string
	// Sync is the commit durability; default SyncFull.
	Sync Sync
	// QueueSize bounds the writer's queue; default 1024.
	QueueSize int
	// ReadConns is the size of the read pool; default max(4, 2×CPUs).
	ReadConns int
	// CheckpointIdle: checkpoint after this long without writes; default 1s.
	CheckpointIdle time.Duration
	// CheckpointBytes: the writer checkpoints at once when the WAL grows past
	// this, which routine background checkpoints normally prevent; default
	// 256 MiB.
	CheckpointBytes int64
	// PassiveCheckpointsOnly stops the writer's TRUNCATE checkpoints (when
	// idle, past CheckpointBytes, on Close), leaving only the background
	// PASSIVE ones, which never reset the WAL under a reader. Set it when a
	// replicator such as Litestream runs its own checkpoints: a TRUNCATE that
	// slips in while it switches locks makes it miss WAL frames and start a
	// new snapshot generation. The WAL's size is then the replicator's to
	// bound.
	PassiveCheckpointsOnly bool
	// Limits are the plan quotas; zero fields take DefaultLimits.
	Limits Limits
	// AttemptTimeout is how long a processing attempt stays live: a
	// /processing call after it closes the attempt as failed (abandoned) and
	// starts a new one. Default 10 minutes.
	AttemptTimeout time.Duration
	// FileChunkSize is the bytes of a file one stored chunk holds; default
	// DefaultFileChunkSize. Files keep the chunk size they were stored with.
	FileChunkSize int64
	// BulkQueue bounds the bulk deletion jobs open (queued or processing) at
	// once, everyone's together; beyond it a new job is refused as
	// unavailable. Default 64.
	BulkQueue int
	// Logger receives the store's warnings; default slog.Default().
	Logger *slog.Logger
	// JobLeaseTTL is how long the lease of a background job (the bulk
	// deletion worker, the retention purge; leases.go) lasts unless its
	// holder renews it, which it does every third of it: how soon another
	// process sharing the database takes the job over when its holder
	// died. Default DefaultJobLeaseTTL.
	JobLeaseTTL time.Duration
	// JobPoll is how often the process holding a job's lease looks for
	// work other processes queued (a bulk deletion job, a retention
	// setting changed); what it queued itself wakes it at once. Default
	// DefaultJobPoll.
	JobPoll time.Duration
	// Existing opens the database as it is, for the commands that use a
	// database rather than set one up: a SQLite file that is not there is
	// not created, and the schema is neither created nor upgraded. A
	// database without chatd's schema (an empty file, another program's),
	// one at an older schema version (ErrSchemaTooOld) and one at a newer
	// (ErrSchemaTooNew) are refused and left as they were. Without it,
	// Open creates and upgrades, as chatd serve and chatd migrate do.
	Existing bool

	// driver is the database/sql driver the store's connections use:
	// SQLite's, or in tests a wrapper that watches what the store runs.
	driver string
	// restartBytes is the WAL size past which the writer catches up so the
	// WAL starts over (checkpoint.go); default defaultRestartBytes, smaller
	// in tests.
	restartBytes int64
}

// DB is an open chatd database.
type DB struct {
	path    string
	dialect dialect
	read    *sql.DB
	write   *sql.DB
	w       *writer
	limits  Limits
	log     *slog.Logger

	readStmts      *stmtCache
	ckpt           *checkpointer
	listener       *writesListener
	indexer        *indexer
	ckptDB         *sql.DB
	closeOnce      sync.Once
	closeErr       error
	creds          credCache
	publisher      publisherSlot
	attemptTimeout time.Duration
	fileChunkSize  int64
	bulk           bulkWorker
	bulkQueue      int
	purge          purgeWorker
	webhooks       *webhookWake
	nodeID         string
	leases         leaseBook
	jobLeaseTTL    time.Duration
	jobPoll        time.Duration

	migratedFrom, version int
}

// Open opens (creating if needed) the database at location, creates or
// upgrades its schema (unless opts.Existing), and starts the writer. location is a SQLite file's
// path, whose directory is created if missing, or a PostgreSQL URL
// (postgres://…, see IsDatabaseURL).
func Open(location string, opts Options) (*DB, error) {
	if strings.TrimSpace(location) == "" {
		return nil, errors.New("database path is empty")
	}
	target, err := schemaVersion(opts.Schema)
	if err != nil {
		return nil, err
	}
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if IsDatabaseURL(location) {
		db := newDB(location, postgresDialect, opts)
		return db.opened(db.openPostgres(location, opts, target))
	}
	abs, err := filepath.Abs(location)
	if err != nil {
		return nil, err
	}
	if opts.Existing {
		if err := existingFile(abs); err != nil {
			return nil, err
		}
	} else if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a chatd database", abs)
	} else if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("create database directory: %w", err)
	} else if err := ensurePrivateFile(abs); err != nil {
		return nil, err
	}
	db := newDB(abs, sqliteDialect, opts)
	return db.opened(db.open(opts, target))
}

// existingFile refuses, for Options.Existing, a path that names no file:
// SQLite would create one there.
func existingFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no database at %s", path)
	case err != nil:
		return fmt.Errorf("open %s: %w", path, err)
	case fi.IsDir():
		return fmt.Errorf("%s is a directory, not a chatd database", path)
	}
	return nil
}

// ensurePrivateFile creates the database file at path, empty and readable by
// its owner only, if it is not there yet: it holds the token-signing
// secret and the digests of every key, and SQLite would create it
// world-readable (0644 under the usual umask). Its -wal and -shm files
// take its mode. A file already there keeps the mode it has.
func ensurePrivateFile(path string) error {
	if err := createPrivate(path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

func newDB(path string, d dialect, opts Options) *DB {
	return &DB{path: path, dialect: d, limits: opts.Limits.withDefaults(), log: opts.Logger, attemptTimeout: opts.AttemptTimeout,
		fileChunkSize: opts.FileChunkSize, bulkQueue: opts.BulkQueue, bulk: bulkWorker{wake: make(chan struct{}, 1)},
		purge:    purgeWorker{wake: make(chan struct{}, 1)},
		webhooks: newWebhookWake(), nodeID: newNodeID(), jobLeaseTTL: opts.JobLeaseTTL, jobPoll: opts.JobPoll}
}

// opened returns db once its opening succeeded. When it failed, Close
// releases whatever the opening got before it failed, and only that.
func (db *DB) opened(err error) (*DB, error) {
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// complete checks opts and fills in the defaults of the fields left zero.
func (opts *Options) complete() error {
	if opts.Sync == "" {
		opts.Sync = SyncFull
	}
	if opts.Sync != SyncFull && opts.Sync != SyncNormal {
		return fmt.Errorf("sync must be %q or %q, not %q", SyncFull, SyncNormal, opts.Sync)
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 1024
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = max(4, 2*runtime.NumCPU())
	}
	if opts.CheckpointIdle <= 0 {
		opts.CheckpointIdle = time.Second
	}
	if opts.CheckpointBytes <= 0 {
		opts.CheckpointBytes = 256 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = 10 * time.Minute
	}
	if opts.FileChunkSize <= 0 {
		opts.FileChunkSize = DefaultFileChunkSize
	}
	if opts.BulkQueue <= 0 {
		opts.BulkQueue = 64
	}
	if opts.JobLeaseTTL <= 0 {
		opts.JobLeaseTTL = DefaultJobLeaseTTL
	}
	if opts.JobLeaseTTL > maxLeaseTTL {
		return fmt.Errorf("a job's lease lasts at most %v, not %v", maxLeaseTTL, opts.JobLeaseTTL)
	}
	if opts.JobPoll <= 0 {
		opts.JobPoll = DefaultJobPoll
	}
	if opts.driver == "" {
		opts.driver = "sqlite"
	}
	return nil
}

// open takes db from a path to a running database, one step at a time:
// the write connection (which migrates the schema before anything else
// reads it), the read pool, the writer, the checkpointer, the search
// indexer. A step that fails
// leaves what the earlier ones opened for Close.
func (db *DB) open(opts Options, target int) error {
	dsn := connStrings(db.path, opts.Sync, opts.driver, !opts.Existing)
	if err := db.openWriteConn(dsn); err != nil {
		return err
	}
	if err := db.migrateSchema(opts.Schema, target, opts.Existing); err != nil {
		return describeOpenError(db.path, err)
	}
	if err := db.openReadPool(dsn, opts.ReadConns); err != nil {
		return err
	}
	if err := db.startWriter(opts); err != nil {
		return err
	}
	if err := db.startCheckpointer(dsn.write, opts.restartBytes); err != nil {
		return err
	}
	db.startIndexer()
	return nil
}

// fileURI is the SQLite URI of the file at path, escaped so that any path
// names its file.
func fileURI(path string) string { return "file:" + (&url.URL{Path: path}).EscapedPath() }

// fileMode is how openFile opens a file: readOnly, or readWrite (creating
// it if missing).
type fileMode string

const (
	readOnly  fileMode = "ro"
	readWrite fileMode = "rwc"
)

// openFile opens the database file at path directly, not as a store, for
// copying, checking or looking into a file another process may have open:
// on one connection that waits for that process's locks as a store's own
// connections do.
func openFile(path string, mode fileMode) (*sql.DB, error) {
	dsn := fileURI(path) + fmt.Sprintf("?mode=%s&_pragma=busy_timeout(%d)", mode, busyTimeout.Milliseconds())
	conn, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(1)
	return conn, nil
}

// dsns are the connection strings of a database and the driver they are
// for: the pragmas every connection applies are part of them, so that a
// connection the pool reopens gets them too.
type dsns struct{ driver, write, read string }

// create says whether a connection may create the file (SQLite's mode=rwc)
// or only open it as it is (mode=rw: Options.Existing).
func connStrings(abs string, sync Sync, driver string, create bool) dsns {
	base := fileURI(abs)
	mode := readWrite
	if !create {
		mode = "rw"
	}
	common := fmt.Sprintf("mode=%s&_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", mode, busyTimeout.Milliseconds())
	// WAL is not set here: it is a mode of the file, not of the connection,
	// which migrate sets once it has found the file to be chatd's, so that
	// a file it refuses is left as it was.
	write := base + "?" + common +
		"&_pragma=synchronous(" + strings.ToUpper(string(sync)) + ")" +
		"&_pragma=journal_size_limit(67108864)" +
		"&_pragma=wal_autocheckpoint(0)" + // the writer checkpoints, see writer.checkpoint
		// Savepoint journals (one savepoint per job) stay in memory instead
		// of spilling to a temp file, and a batch's pages stay in the cache.
		"&_pragma=temp_store(MEMORY)" +
		"&_pragma=cache_size(-65536)" +
		"&_txlock=immediate" // for migrate; the writer issues BEGIN IMMEDIATE itself
	return dsns{driver: driver, write: write, read: base + "?" + common + "&_pragma=query_only(1)"}
}

// openWriteConn opens the pool of the one write connection, kept open for
// the database's life.
func (db *DB) openWriteConn(dsn dsns) error {
	var err error
	if db.write, err = sql.Open(dsn.driver, dsn.write); err != nil {
		return err
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetMaxIdleConns(1)
	db.write.SetConnMaxLifetime(0)
	db.write.SetConnMaxIdleTime(0)
	return nil
}

// migrateSchema brings the schema to version target, or with existing
// checks that it is there already, and makes sure the server secret
// exists, before any reader or the writer starts.
func (db *DB) migrateSchema(schema string, target int, existing bool) error {
	var err error
	if existing {
		db.migratedFrom, err = requireSchema(db.write, target)
	} else {
		db.migratedFrom, err = migrate(db.write, schema, target)
	}
	if err != nil {
		return err
	}
	db.version = target
	return ensureSecret(db.write, db.dialect.bind)
}

// openReadPool opens the pool of read-only connections.
func (db *DB) openReadPool(dsn dsns, conns int) error {
	var err error
	if db.read, err = sql.Open(dsn.driver, dsn.read); err != nil {
		return err
	}
	db.readStmts = newStmtCache(db.read, db.dialect.bind)
	db.read.SetMaxOpenConns(conns)
	db.read.SetMaxIdleConns(conns)
	return nil
}

// startWriter hands the write connection to the writer goroutine, which
// owns it from then on.
func (db *DB) startWriter(opts Options) error {
	conn, err := db.write.Conn(context.Background())
	if err != nil {
		return err
	}
	db.w = newWriter(conn, db.dialect, opts.QueueSize, db.path+"-wal", opts.CheckpointIdle, opts.CheckpointBytes, opts.PassiveCheckpointsOnly, opts.Logger)
	otherWrites := db.otherProcessWrote
	db.w.otherWrites.Store(&otherWrites)
	return nil
}

// startCheckpointer starts the background checkpoints. Their connection
// comes from a pool of its own, opened like the writer's (a query_only
// connection may not checkpoint).
func (db *DB) startCheckpointer(writeDSN string, restartBytes int64) error {
	var err error
	if db.ckptDB, err = sql.Open("sqlite", writeDSN); err != nil {
		return err
	}
	conn, err := db.ckptDB.Conn(context.Background())
	if err != nil {
		return err
	}
	var pageSize int64
	if err := conn.QueryRowContext(context.Background(), "PRAGMA page_size").Scan(&pageSize); err != nil {
		conn.Close()
		return err
	}
	if restartBytes <= 0 {
		restartBytes = defaultRestartBytes
	}
	db.ckpt = newCheckpointer(conn, db.w, pageSize, restartBytes, db.log)
	return nil
}

// Close stops accepting writes, runs every write already queued, checkpoints
// the WAL into the database file and closes all connections. It also
// releases a database that Open could not finish opening: each part is
// closed if it was opened.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		// The workers' next steps would only meet a closed writer.
		db.StopBulkWorker()
		db.StopPurgeWorker()
		if db.indexer != nil {
			db.indexer.close()
		}
		if db.ckpt != nil {
			db.ckpt.close()
		}
		if db.ckptDB != nil {
			db.ckptDB.Close()
		}
		if db.listener != nil {
			db.listener.close()
		}
		if db.w != nil {
			db.w.close()
		}
		var readErr, writeErr error
		if db.read != nil {
			db.readStmts.close()
			readErr = db.read.Close()
		}
		if db.write != nil {
			writeErr = db.write.Close()
		}
		db.closeErr = errors.Join(readErr, writeErr)
	})
	return db.closeErr
}

// Path is the absolute path of the database file, or the URL of the
// PostgreSQL database.
func (db *DB) Path() string { return db.path }

// Rebind returns query with its ? placeholders in the form the database
// takes, for callers that reach the database directly rather than through
// the store (tests, and tools that inspect it).
func (db *DB) Rebind(query string) string { return db.dialect.bind(query) }

// SchemaVersion is the schema version the database is at.
func (db *DB) SchemaVersion() int { return db.version }

// MigratedFrom is the schema version found when the database was opened (0
// for a new database); it equals SchemaVersion when nothing was upgraded.
func (db *DB) MigratedFrom() int { return db.migratedFrom }

// Limits are the quotas in force.
func (db *DB) Limits() Limits { return db.limits }

// Ping checks that the database answers reads and that a write transaction
// can be committed, through the writer like any other write.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	if err := db.queryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return err
	}
	return db.Write(ctx, func(*Tx) error { return nil })
}

// Pages is the database file's size in SQLite's pages: all of them, and
// those on the free list (left by deletions, reused by later writes; only
// a VACUUM gives them back to the file system).
type Pages struct {
	Size, Count, Free int64 // Size in bytes
}

// Pages reads the page counts (dialect.pagesQuery): no table is read.
func (db *DB) Pages(ctx context.Context) (Pages, error) {
	var p Pages
	err := db.readTx(ctx, func(q readQ) error {
		return q.QueryRow(db.dialect.pagesQuery).Scan(&p.Size, &p.Count, &p.Free)
	})
	return p, err
}

// readTx runs fn in one read transaction, so that several queries (a page
// and its total, say) see the same snapshot.
func (db *DB) readTx(ctx context.Context, fn func(readQ) error) error {
	tx, err := db.read.BeginTx(ctx, &db.dialect.snapshot)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(readQ{ctx: ctx, tx: tx, cache: db.readStmts})
}

func describeOpenError(path string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%s is not a SQLite database", path)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
			return fmt.Errorf("cannot open %s for writing: %v", path, err)
		}
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// isBusy reports whether err is a lock another writer holds: SQLite's
// "database is locked/busy", or PostgreSQL's lock and serialization
// failures.
func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	if pe, ok := postgresError(err); ok {
		// serialization_failure, deadlock_detected, lock_not_available
		return pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "55P03"
	}
	return false
}

// isConstraint reports whether err is a constraint violation (unique, check,
// foreign key), on either database.
func isConstraint(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
	}
	pe, ok := postgresError(err)
	return ok && strings.HasPrefix(pe.Code, "23") // integrity_constraint_violation
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
