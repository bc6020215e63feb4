package store

import (
	"database/sql"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestSearchTokenizerMeasurements compares the FTS5 tokenizers chatd could
// index messages with, on the benchmark's corpus: index size per message,
// the time to index, and for each kind of query how many messages it finds
// and how long the top 20 by rank take. It measures and decides nothing;
// docs/performance.md#search keeps the figures and the decision.
//
//	CHATD_SEARCH_MEASURE=1 go test ./store -run TestSearchTokenizerMeasurements -v
func TestSearchTokenizerMeasurements(t *testing.T) {
	if os.Getenv("CHATD_SEARCH_MEASURE") == "" {
		t.Skip("a measurement, not a test: set CHATD_SEARCH_MEASURE=1 to run it")
	}
	n := searchBenchMessages()
	corpus := newSearchCorpus(t, 1)
	contents := make([]string, n)
	for i := range contents {
		_, contents[i] = corpus.message()
	}
	queries := []string{`"message"`, `"messages"`, `"cafe"`, `"café"`, `"deliv"*`, `"elivery"`, `"read marker"`,
		`"ead mark"`, `"デプロイ"`, `"デプロイ"*`, `"ログ"`, `"ログ"*`, `"grösse"`, `"größe"`, `"store" "deliveries"`}
	for _, tokenizer := range []string{"unicode61 remove_diacritics 2", "trigram remove_diacritics 1", "trigram"} {
		t.Run(tokenizer, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "measure.db")
			raw, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			raw.SetMaxOpenConns(1)
			mustExec(t, raw, `CREATE TABLE docs (seq INTEGER PRIMARY KEY, content TEXT NOT NULL)`)
			tx, _ := raw.Begin()
			for i, c := range contents {
				if _, err := tx.Exec(`INSERT INTO docs VALUES (?, ?)`, i+1, c); err != nil {
					t.Fatal(err)
				}
			}
			tx.Commit()
			mustExec(t, raw, `VACUUM`)
			before := fileSize(path)
			mustExec(t, raw, `CREATE VIRTUAL TABLE fts USING fts5 (content, content = 'docs', content_rowid = 'seq', tokenize = '`+tokenizer+`')`)
			start := time.Now()
			mustExec(t, raw, `INSERT INTO fts (fts) VALUES ('rebuild')`)
			took := time.Since(start)
			mustExec(t, raw, `VACUUM`)
			size := fileSize(path) - before
			t.Logf("%s: %d messages (%d bytes of text); index %d bytes, %.0f bytes a message (%.2f× the text); indexed in %v (%.1f µs a message)",
				tokenizer, n, before, size, float64(size)/float64(n), float64(size)/float64(before), took.Round(time.Millisecond),
				float64(took.Microseconds())/float64(n))
			for _, q := range queries {
				var found int
				if err := raw.QueryRow(`SELECT count(*) FROM fts WHERE fts MATCH ?`, q).Scan(&found); err != nil {
					t.Logf("  %-22s error: %v", q, err)
					continue
				}
				t.Logf("  %-22s finds %6d; top 20 by rank in %v", q, found, medianTime(t, raw, q))
			}
		})
	}
}

// medianTime is the median time of five runs of the top 20 of q by rank.
func medianTime(t *testing.T, raw *sql.DB, q string) time.Duration {
	var times []time.Duration
	for range 5 {
		start := time.Now()
		rows, err := raw.Query(`SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT 20`, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
		}
		rows.Close()
		times = append(times, time.Since(start))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times[2].Round(10 * time.Microsecond)
}

func mustExec(t *testing.T, raw *sql.DB, query string) {
	t.Helper()
	if _, err := raw.Exec(query); err != nil {
		t.Fatalf("%s: %v", strings.SplitN(query, "\n", 2)[0], err)
	}
}
