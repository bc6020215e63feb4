package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/store"
)

// postgresAdmin is the -postgres flag: a URL of a PostgreSQL server on
// which the mode "postgres" (in -sync) creates a fresh database per run,
// dropped after it.
var postgresAdmin = flag.String("postgres", "", `a PostgreSQL URL whose role may create databases: -sync's mode "postgres" runs the HTTP workloads on a fresh database there, dropped after the run`)

// postgresMode is the -sync mode that runs the server on PostgreSQL.
const postgresMode = "postgres"

// benchDatabase is the database a run's server uses: a SQLite file in dir,
// or, in postgresMode, a fresh PostgreSQL database; drop removes the latter.
func benchDatabase(mode, dir string) (location string, drop func(), err error) {
	if mode != postgresMode {
		return filepath.Join(dir, "chatd.db"), func() {}, nil
	}
	if *postgresAdmin == "" {
		return "", nil, fmt.Errorf(`-sync %s needs -postgres URL`, postgresMode)
	}
	name := fmt.Sprintf("chatd_bench_%d", time.Now().UnixNano())
	if err := postgresAdminExec("CREATE DATABASE " + name); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(*postgresAdmin)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() { _ = postgresAdminExec("DROP DATABASE " + name + " WITH (FORCE)") }, nil
}

func postgresAdminExec(statement string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, *postgresAdmin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, statement)
	return err
}

// databaseArgs names the database on a chatd command line.
func databaseArgs(location string) []string {
	if store.IsDatabaseURL(location) {
		return []string{"--database-url", location}
	}
	return []string{"--db", location}
}

// syncArgs is the --sync flag of a mode; PostgreSQL's own settings govern
// its durability.
func syncArgs(mode string) []string {
	if mode == postgresMode {
		return nil
	}
	return []string{"--sync", mode}
}
