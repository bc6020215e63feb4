package main

import (
	"database/sql"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite"
)

// The search index workload: what indexing messages for search costs a
// post over HTTP. The post workload runs on servers started alike, one on
// a database as chatd makes it and one whose index triggers were dropped
// before it started (its messages are stored, and never indexed), in turn
// twice, the second time in reverse, so that a busier stretch of a shared
// machine weighs on both alike.
func searchIndexWorkload(bin, mode string, clients int, d time.Duration) error {
	fmt.Printf("searchindex: %d clients posting over REST for %s, sync %s, with the search index and without it\n", clients, d, mode)
	fmt.Printf("%-8s %-8s %7s %10s %9s %9s %8s\n", "index", "workload", "clients", "req/s", "p50", "p99", "errors")
	for _, indexed := range []bool{true, false, false, true} {
		label, prepare := "indexed", func(string) error { return nil }
		if !indexed {
			label, prepare = "none", dropSearchIndexTriggers
		}
		if err := runModeOn(bin, mode, label, clients, d, 0, []string{"post"}, prepare); err != nil {
			return err
		}
	}
	return nil
}

// dropSearchIndexTriggers drops the triggers that queue messages for the
// search index, in the database at path.
func dropSearchIndexTriggers(path string) error {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'messages_fts%'`)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		names = append(names, n)
	}
	rows.Close()
	if len(names) == 0 {
		return fmt.Errorf("no search index triggers in %s", path)
	}
	_, err = db.Exec(`DROP TRIGGER ` + strings.Join(names, `; DROP TRIGGER `))
	return err
}
