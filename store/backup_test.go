package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// A backup taken while the writer keeps committing is a consistent copy
// holding at least everything committed before it began.
func TestBackupWhileWriting(t *testing.T) {
	sqliteOnly(t)
	db := openTableDB(t, Options{})
	for i := 0; i < 100; i++ {
		if err := db.Write(context.Background(), insertRow(fmt.Sprint("pre", i), i)); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var written atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := db.Write(context.Background(), insertRow(fmt.Sprintf("live-%d-%d", w, i), i)); err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
			}
		})
	}
	waitFor(t, "concurrent writes", func() bool { return written.Load() > 50 })
	dest := filepath.Join(t.TempDir(), "copy.db")
	err := Backup(context.Background(), db.Path(), dest, false)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}

	copyDB, err := sql.Open("sqlite", "file:"+dest+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer copyDB.Close()
	var check string
	var pre, live, version int
	copyDB.QueryRow(`PRAGMA integrity_check`).Scan(&check)
	copyDB.QueryRow(`PRAGMA user_version`).Scan(&version)
	copyDB.QueryRow(`SELECT count(*) FROM t WHERE k LIKE 'pre%'`).Scan(&pre)
	copyDB.QueryRow(`SELECT count(*) FROM t WHERE k LIKE 'live-%'`).Scan(&live)
	current, _ := schemaVersion(testSchema)
	if check != "ok" || version != current || pre != 100 || live < 50 {
		t.Fatalf("copy: integrity %q, version %d, %d rows from before, %d live rows", check, version, pre, live)
	}

	if err := Backup(context.Background(), db.Path(), dest, false); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("overwrote without permission: %v", err)
	}
	if err := Backup(context.Background(), db.Path(), db.Path(), true); err == nil {
		t.Fatal("backed up onto the database itself")
	}
	entries, _ := os.ReadDir(filepath.Dir(dest))
	if len(entries) != 1 {
		t.Fatalf("leftovers beside the copy: %v", entries)
	}
}
