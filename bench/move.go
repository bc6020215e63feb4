package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// moveWorkload measures chatd move: a SQLite database of the given number
// of messages, seeded as the scale workload seeds it, moved into a fresh
// database of the -postgres server; it prints how long the move took and
// the size of the database on each side.
func moveWorkload(bin string, messages int) error {
	dir, err := os.MkdirTemp("", "chatd-bench-move-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "chatd.db")
	if err := exec.Command(bin, "migrate", "--db", path).Run(); err != nil {
		return fmt.Errorf("chatd migrate: %w", err)
	}
	s, err := openSeeder(path)
	if err != nil {
		return err
	}
	start := time.Now()
	err = s.grow(messages)
	s.db.Close()
	if err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	fmt.Printf("seeded %d messages in %d rooms, %d people, %d agents in %s\n", s.messages, len(s.rooms), len(s.people), len(s.agents),
		time.Since(start).Round(time.Second))
	sqliteBytes := fileBytes(path) + fileBytes(path+"-wal")

	target, drop, err := benchDatabase(postgresMode, dir)
	if err != nil {
		return err
	}
	defer drop()
	start = time.Now()
	move := exec.Command(bin, "move", "--db", path, "--to", target)
	move.Stderr = os.Stderr // its progress: where the time goes
	out, err := move.Output()
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("chatd move: %v\n%s", err, out)
	}
	pgBytes, err := databaseSize(target)
	if err != nil {
		return err
	}
	fmt.Printf("%-10s %10s %12s %14s %12s %8s\n", "messages", "move", "messages/s", "SQLite file", "PostgreSQL", "ratio")
	fmt.Printf("%-10d %10s %12.0f %14s %12s %8.2f\n", s.messages, took.Round(100*time.Millisecond),
		float64(s.messages)/took.Seconds(), mib(sqliteBytes), mib(pgBytes), float64(pgBytes)/float64(sqliteBytes))
	return nil
}

func fileBytes(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// databaseSize is pg_database_size of the database at url.
func databaseSize(url string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
	return n, err
}
